"""Shutting the gateway down: streams in flight finish within the drain timeout; idle connections
close at once; nothing new is accepted."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from lanewatch.collector.gateway import Gateway, GatewayServer
from lanewatch.collector.gateway.settings import GatewayConfig

from .gateway_harness import chat_body, upstream_server

pytestmark = pytest.mark.integration


async def _stream(session: aiohttp.ClientSession, url: str, started: asyncio.Event) -> bool:
    """True when the stream ended with [DONE]."""
    try:
        async with session.post(f"{url}/v1/chat/completions", json=chat_body(20)) as resp:
            data = b""
            async for chunk in resp.content.iter_any():
                started.set()
                data += chunk
            return b"data: [DONE]" in data
    except aiohttp.ClientError:
        return False


async def _shutdown_during_stream(drain_s: float) -> tuple[bool, float, bool]:
    """(stream finished, seconds the shutdown took, a new connection was refused after it)."""
    async with upstream_server(first_ms=1, gap_ms=40) as (_up, up_url):  # 20 chunks: 0.8 s
        gw = Gateway(GatewayConfig.model_validate({"lanes": {"slow": {"upstreams": [up_url]}}}))
        server = GatewayServer(gw)
        port = await server.start("127.0.0.1", 0)
        url = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as idle, aiohttp.ClientSession() as s:
            assert (await idle.get(f"{url}/healthz")).status == 200  # a kept-alive connection, idle
            started = asyncio.Event()
            stream = asyncio.create_task(_stream(s, url, started))
            await asyncio.wait_for(started.wait(), 10)
            t0 = time.monotonic()
            await server.shutdown(drain_s)
            took = time.monotonic() - t0
            finished = await asyncio.wait_for(stream, 10)
            try:
                await asyncio.open_connection("127.0.0.1", port)
                refused = False
            except OSError:
                refused = True
    return finished, took, refused


async def test_open_streams_finish_within_the_drain_timeout() -> None:
    finished, took, refused = await _shutdown_during_stream(30.0)
    assert finished and refused
    assert took < 20.0  # the stream's end, not the whole timeout (the idle connection did not hold it)


async def test_without_a_drain_open_streams_are_cut() -> None:
    finished, _took, refused = await _shutdown_during_stream(0.0)
    assert not finished and refused
