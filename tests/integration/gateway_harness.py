"""Run the test SSE upstream and the gateway inside the test's event loop, on ephemeral ports."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from lanewatch.collector.config import GatewayConfig
from lanewatch.collector.gateway import Gateway, build_app
from lanewatch.collector.timing import RequestTiming
from tests.sse_upstream import SseUpstream


async def _serve(app: web.Application, **runner_kw: Any) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None, **runner_kw)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    sock: socket.socket = server.sockets[0]  # type: ignore[attr-defined]
    return runner, f"http://127.0.0.1:{sock.getsockname()[1]}"


@asynccontextmanager
async def upstream_server(**kw: Any) -> AsyncIterator[tuple[SseUpstream, str]]:
    """The test upstream, served until the block ends."""
    up = SseUpstream(**kw)
    runner, url = await _serve(up.app, handler_cancellation=True)
    try:
        yield up, url
    finally:
        await runner.cleanup()


@dataclass
class RunningGateway:
    """A gateway under test: its URL, its state and the records its tap made."""

    url: str
    gw: Gateway
    records: list[RequestTiming] = field(default_factory=list)


@asynccontextmanager
async def gateway_server(lanes: dict[str, list[str]], **cfg: Any) -> AsyncIterator[RunningGateway]:
    """A gateway over `lanes` (name -> upstream URLs) with extra GatewayConfig fields."""
    config = GatewayConfig.model_validate({"lanes": {k: {"upstreams": v} for k, v in lanes.items()}, **cfg})
    records: list[RequestTiming] = []
    gw = Gateway(config, on_record=records.append)
    runner, url = await _serve(build_app(gw), handler_cancellation=True)
    try:
        yield RunningGateway(url, gw, records)
    finally:
        await runner.cleanup()


def chat_body(max_tokens: int = 4, stream: bool = True, content: str = "hi", **extra: Any) -> dict[str, Any]:
    """A chat completions request body."""
    body = {"model": "test-model", "max_tokens": max_tokens, "stream": stream, **extra}
    body["messages"] = [{"role": "user", "content": content}]
    return body


async def read_events(resp: Any) -> list[tuple[float, bytes]]:
    """Each SSE event of a streamed aiohttp response with the monotonic time it became complete."""
    import time

    events: list[tuple[float, bytes]] = []
    buf = b""
    async for data in resp.content.iter_any():
        now = time.monotonic()
        buf += data
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            events.append((now, event))
    return events


async def eventually(condition: Callable[[], bool], within_s: float = 3.0) -> bool:
    """Whether `condition` holds within `within_s` seconds (checked every 10 ms)."""
    import asyncio

    for _ in range(int(within_s / 0.01)):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


@asynccontextmanager
async def one_lane(
    first_ms: float = 1.0, gap_ms: float = 1.0, **cfg: Any
) -> AsyncIterator[tuple[SseUpstream, RunningGateway, aiohttp.ClientSession]]:
    """A test upstream as lane `slow` of a gateway, and a client session."""
    async with (
        upstream_server(first_ms=first_ms, gap_ms=gap_ms) as (up, url),
        gateway_server({"slow": [url]}, **cfg) as g,
        aiohttp.ClientSession() as s,
    ):
        yield up, g, s
