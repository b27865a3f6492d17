"""The gateway's own answers beside the admin API: `/v1/models` over every lane, `/healthz`, `/metrics`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from ssl import SSLContext
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.common.secrets import holds_token

from .connection import FrontConn, Request, Response
from .errors import error_response

if TYPE_CHECKING:  # the later rooms' types the endpoints read, for the checker only
    from ..admission.classify import Classifier

__all__ = ["Served", "healthz", "metrics", "models"]


class _Upstream(Protocol):
    @property
    def url(self) -> str: ...


class _Pool(Protocol):
    """What the endpoints read of a lane's pool: its health, and an upstream to ask for models."""

    @property
    def upstreams(self) -> Sequence[object]: ...
    @property
    def healthy_count(self) -> int: ...
    def pick(self) -> _Upstream | None:
        """An upstream to send to, if any is healthy."""
        ...


class Served(Protocol):
    """What the gateway's own endpoints read of it: its lanes, their pools, keys and TLS, the hint
    token, the control session and the metrics the wiring renders."""

    @property
    def lane_order(self) -> Sequence[str]: ...
    @property
    def pools(self) -> Mapping[str, _Pool]: ...
    @property
    def api_keys(self) -> Mapping[str, str | None]: ...
    @property
    def ssl(self) -> Mapping[str, SSLContext]: ...
    @property
    def classifier(self) -> Classifier: ...
    @property
    def control(self) -> aiohttp.ClientSession | None: ...
    @property
    def metrics_text(self) -> Callable[[], tuple[bytes, str]] | None: ...


def _json(data: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(data).encode())


async def models(gw: Served, request: Request, _conn: FrontConn) -> Response:
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


async def _lane_models(gw: Served, lane: str, request: Request) -> list[Any] | None:
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


async def healthz(gw: Served, _request: Request, _conn: FrontConn) -> Response:
    """200 while every lane has a healthy upstream, else 503; the body says which."""
    lanes = {
        lane: {"healthy": p.healthy_count, "upstreams": len(p.upstreams)} for lane, p in gw.pools.items()
    }
    ok = all(v["healthy"] > 0 for v in lanes.values())
    return _json({"status": "ok" if ok else "degraded", "lanes": lanes}, 200 if ok else 503)


async def metrics(gw: Served, _request: Request, _conn: FrontConn) -> Response:
    """The Prometheus text the wiring (cli) gave the gateway, rendered on a worker thread."""
    if gw.metrics_text is None:
        return error_response(404, "metrics are not enabled")
    # Off the loop: a full series budget takes tens of ms to render, and streams must not wait.
    # The collectors copy what they read under their lock or as one dict copy (exporters/).
    body, content_type = await asyncio.to_thread(gw.metrics_text)
    return Response(200, body, content_type=content_type)
