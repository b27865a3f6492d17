"""The gateway's HTTP face: the OpenAI front, /v1/models, /healthz, /metrics and the admin API."""

from __future__ import annotations

import asyncio
import json
import resource
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from lanewatch.collector.common.bearer import holds_token
from lanewatch.collector.common.headers import AUTHORIZATION

from .admin import denied, get_degrade, put_degrade
from .core import Gateway
from .errors import error_body, error_response
from .front import FrontConn, FrontLimits, Handler, HeadCheck, Request, Response
from .front_server import FrontServer
from .proxy import handle_completion

__all__ = ["GatewayServer", "default_max_connections", "head_check", "router"]

ADMIN_PATH = "/admin/degrade"
GatewayHandler = Callable[[Gateway, Request, FrontConn], Awaitable[Response | None]]


def router(
    gw: Gateway, overrides: Mapping[str, Mapping[str, Handler]] | None = None
) -> Callable[[str, str], Handler | Response]:
    """(method, path) → the handler, or the 404/405 answer in OpenAI error JSON; `overrides`
    replace the handlers of their paths (a worker's /metrics and admin API, workers.py)."""

    def chat(request: Request, conn: FrontConn) -> Response | Awaitable[Response | None]:
        return handle_completion(gw, request, conn, "chat")

    def completions(request: Request, conn: FrontConn) -> Response | Awaitable[Response | None]:
        return handle_completion(gw, request, conn, "completions")

    def bind(fn: GatewayHandler) -> Handler:
        def handler(request: Request, conn: FrontConn) -> Awaitable[Response | None]:
            return fn(gw, request, conn)

        return handler

    routes: dict[str, dict[str, Handler]] = {
        "/v1/chat/completions": {"POST": chat},
        "/v1/completions": {"POST": completions},
        "/v1/models": {"GET": bind(models)},
        "/healthz": {"GET": bind(healthz)},
        "/metrics": {"GET": bind(metrics)},
        ADMIN_PATH: {"GET": bind(get_degrade), "PUT": bind(put_degrade)},
    }
    routes.update({path: dict(methods) for path, methods in (overrides or {}).items()})

    def resolve(method: str, path: str) -> Handler | Response:
        methods = routes.get(path)
        if methods is None:
            return error_response(404, f"Not Found: {method} {path}")
        handler = methods.get(method)
        if handler is None:
            allow = {"Allow": ", ".join(methods)}
            return error_response(405, f"Method Not Allowed: {method} {path}", headers=allow)
        return handler

    return resolve


def head_check(gw: Gateway) -> HeadCheck:
    """The admin API's credential check, made on the head before a body is asked for."""

    def check(_method: str, path: str, headers: Mapping[str, str]) -> Response | None:
        return denied(gw, headers) if path == ADMIN_PATH else None

    return check


class GatewayServer:
    """A gateway serving on a port: health checks and sessions started, connections accepted."""

    def __init__(self, gw: Gateway, overrides: Mapping[str, Mapping[str, Handler]] | None = None) -> None:
        self.gw = gw
        cfg = gw.cfg
        limits = FrontLimits(
            max_body=cfg.max_body_bytes,
            keepalive_s=cfg.keepalive_timeout_s,
            head_timeout_s=cfg.head_timeout_s,
            max_connections=cfg.max_connections or default_max_connections(),
        )
        self._front = FrontServer(
            router(gw, overrides),
            limits,
            lambda status, message: error_body(status, message),
            gw.stats.count_refused,
            head_check(gw),
        )
        self.port = 0

    async def start(self, host: str, port: int, reuse_port: bool = False) -> int:
        """Start the gateway's background work, then listen; returns the port."""
        await self.gw.start()
        self.port = await self._front.start(host, port, reuse_port)
        return self.port

    async def shutdown(self, drain_s: float = 0.0) -> None:
        """Stop accepting, give requests in flight `drain_s` to finish, drop the rest (their handlers
        finish and record), stop the gateway."""
        await self._front.shutdown(drain_s)
        await self.gw.shutdown()


def default_max_connections() -> int:
    """Half the open-file limit less a reserve (each proxied request also holds an upstream socket)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 10_000
    return max(8, min(10_000, (soft - 64) // 2))


def _json(data: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(data).encode())


async def models(gw: Gateway, request: Request, _conn: FrontConn) -> Response:
    """Every lane's models, merged by id (the fastest lane's entry first)."""
    lists = await asyncio.gather(*(_lane_models(gw, lane, request) for lane in gw.lane_order))
    merged: dict[str, Any] = {}
    for entries in lists:
        for entry in entries or ():
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                merged.setdefault(entry["id"], entry)
    if all(entries is None for entries in lists):
        return error_response(502, "no lane answered /v1/models")
    return _json({"object": "list", "data": list(merged.values())})


async def _lane_models(gw: Gateway, lane: str, request: Request) -> list[Any] | None:
    up = gw.pools[lane].pick()
    if up is None or gw.control is None:
        return None
    headers = {}
    key = gw.api_keys.get(lane)
    auth = request.headers.get(AUTHORIZATION)
    hint = gw.classifier.token
    if auth is not None and hint is not None and holds_token(auth, hint):
        auth = None  # the hint token is the gateway's credential: no upstream sees it
    if key is not None or auth is not None:
        headers[AUTHORIZATION] = f"Bearer {key}" if key is not None else str(auth)
    try:
        async with gw.control.get(up.url + "/v1/models", headers=headers, ssl=gw.ssl[lane]) as resp:
            if resp.status != 200:
                return None
            data = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    entries = data.get("data") if isinstance(data, dict) else None
    return entries if isinstance(entries, list) else None


async def healthz(gw: Gateway, _request: Request, _conn: FrontConn) -> Response:
    """200 while every lane has a healthy upstream, else 503; the body says which."""
    lanes = {
        lane: {"healthy": p.healthy_count, "upstreams": len(p.upstreams)} for lane, p in gw.pools.items()
    }
    ok = all(v["healthy"] > 0 for v in lanes.values())
    return _json({"status": "ok" if ok else "degraded", "lanes": lanes}, 200 if ok else 503)


async def metrics(gw: Gateway, _request: Request, _conn: FrontConn) -> Response:
    """The Prometheus text the wiring (cli) gave the gateway, rendered on a worker thread."""
    if gw.metrics_text is None:
        return error_response(404, "metrics are not enabled")
    # Off the loop: a full series budget takes tens of ms to render, and streams must not wait.
    # The collectors copy what they read under their lock or as one dict copy (exporters/).
    body, content_type = await asyncio.to_thread(gw.metrics_text)
    return Response(200, body, content_type=content_type)
