"""The gateway's HTTP face: the OpenAI front, /v1/models, /healthz, /metrics and the admin API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web

from .admin import get_degrade, put_degrade
from .core import Gateway
from .errors import error_response
from .proxy import handle_completion

__all__ = ["GATEWAY_KEY", "build_app"]

GATEWAY_KEY: web.AppKey[Gateway] = web.AppKey("gateway", Gateway)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_app(gw: Gateway) -> web.Application:
    """An aiohttp application serving `gw`; starting it opens sessions and health checks."""
    app = web.Application(client_max_size=gw.cfg.max_body_bytes)
    app[GATEWAY_KEY] = gw

    def bind(fn: Callable[[Gateway, web.Request], Awaitable[web.StreamResponse]]) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            return await fn(gw, request)

        return handler

    async def chat(request: web.Request) -> web.StreamResponse:
        return await handle_completion(gw, request, "chat")

    async def completions(request: web.Request) -> web.StreamResponse:
        return await handle_completion(gw, request, "completions")

    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", bind(models))
    app.router.add_get("/healthz", bind(healthz))
    app.router.add_get("/metrics", bind(metrics))
    app.router.add_get("/admin/degrade", bind(get_degrade))
    app.router.add_put("/admin/degrade", bind(put_degrade))
    app.middlewares.append(_json_errors)
    app.cleanup_ctx.append(_lifecycle)
    return app


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    gw = app[GATEWAY_KEY]
    await gw.start()
    yield
    await gw.close()


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own 404/405 answers, in OpenAI error JSON like every other error."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, f"{exc.reason}: {request.method} {request.path}")


async def models(gw: Gateway, request: web.Request) -> web.Response:
    """Every lane's models, merged by id (the fastest lane's entry first)."""
    lists = await asyncio.gather(*(_lane_models(gw, lane, request) for lane in gw.lane_order))
    merged: dict[str, Any] = {}
    for entries in lists:
        for entry in entries or ():
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                merged.setdefault(entry["id"], entry)
    if all(entries is None for entries in lists):
        return error_response(502, "no lane answered /v1/models")
    return web.json_response({"object": "list", "data": list(merged.values())})


async def _lane_models(gw: Gateway, lane: str, request: web.Request) -> list[Any] | None:
    up = gw.pools[lane].pick()
    if up is None or gw.control is None:
        return None
    headers = {}
    key = gw.api_keys.get(lane)
    auth = request.headers.get("Authorization")
    if key is not None or auth is not None:
        headers["Authorization"] = f"Bearer {key}" if key is not None else str(auth)
    try:
        async with gw.control.get(up.url + "/v1/models", headers=headers, ssl=gw.ssl[lane]) as resp:
            if resp.status != 200:
                return None
            data = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    entries = data.get("data") if isinstance(data, dict) else None
    return entries if isinstance(entries, list) else None


async def healthz(gw: Gateway, _request: web.Request) -> web.Response:
    """200 while every lane has a healthy upstream, else 503; the body says which."""
    lanes = {
        lane: {"healthy": p.healthy_count, "upstreams": len(p.upstreams)} for lane, p in gw.pools.items()
    }
    ok = all(v["healthy"] > 0 for v in lanes.values())
    return web.json_response(
        {"status": "ok" if ok else "degraded", "lanes": lanes}, status=200 if ok else 503
    )


async def metrics(gw: Gateway, _request: web.Request) -> web.Response:
    """The Prometheus text the wiring (cli) gave the gateway."""
    if gw.metrics_text is None:
        return error_response(404, "metrics are not enabled")
    body, content_type = gw.metrics_text()
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = content_type
    return resp
