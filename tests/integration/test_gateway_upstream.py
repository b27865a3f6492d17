"""The gateway's own upstream client: keep-alive reuse, a connection closed under it, back-pressure."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web

from lanewatch.collector.http1.client import UpstreamConn
from tests.servers import serve_app

from .gateway_harness import chat_body, gateway_server, one_lane

pytestmark = pytest.mark.integration
CHAT = "/v1/chat/completions"
OK = b'{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}'


class _OneShotServer(asyncio.Protocol):
    """Answers the first request on a connection; closes the connection on the second, unanswered."""

    def __init__(self) -> None:
        self.buf = b""
        self.served = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        length = int(self.buf[:end].lower().split(b"content-length:")[1].split(b"\r\n")[0])
        if len(self.buf) < end + 4 + length:
            return
        self.buf = self.buf[end + 4 + length :]
        self.served += 1
        if self.served > 1:
            self.transport.close()  # as a server does when its keep-alive timer fires
            return
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(OK)
        self.transport.write(head + OK)


@asynccontextmanager
async def one_shot_server() -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_OneShotServer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


async def test_keep_alive_connections_are_reused() -> None:
    async with one_lane() as (_up, g, s):
        for _ in range(3):
            async with s.post(g.url + CHAT, json=chat_body(2)) as r:
                await r.read()
    first, *rest = g.records
    assert first.connect_s is not None and first.connect_s > 0
    assert all((r.dns_s, r.connect_s, r.tls_s) == (0.0, 0.0, 0.0) for r in rest)


async def test_a_reused_connection_closed_by_the_server_is_retried_on_a_new_one() -> None:
    async with one_shot_server() as url, gateway_server({"slow": [url]}) as g, aiohttp.ClientSession() as s:
        for _ in range(3):
            async with s.post(g.url + CHAT, json=chat_body(stream=False)) as r:
                assert r.status == 200 and await r.read() == OK
    assert [r.error for r in g.records] == [None, None, None]
    assert all(r.output_tokens == 1 for r in g.records)


async def test_a_slow_client_pauses_the_upstream_and_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = []
    original = UpstreamConn.pause

    def counting(self: UpstreamConn) -> None:
        pauses.append(1)
        original(self)

    monkeypatch.setattr(UpstreamConn, "pause", counting)
    payload = b'data: {"x":"' + b"x" * 4000 + b'"}\n\n'  # a JSON object: not a bad stream

    async def flood(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for _ in range(2000):  # 8 MB, as fast as the socket takes it
            await resp.write(payload)
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post(CHAT, flood)
    runner, url = await serve_app(app)
    try:
        async with (
            gateway_server({"slow": [url]}) as g,
            aiohttp.ClientSession() as s,
            s.post(g.url + CHAT, json=chat_body(stream=False)) as r,
        ):
            got = 0
            async for data in r.content.iter_chunked(64 * 1024):
                got += len(data)
                await asyncio.sleep(0.002)  # a client slower than the upstream
    finally:
        await runner.cleanup()
    assert got == 2000 * len(payload) + len(b"data: [DONE]\n\n")
    assert pauses  # the gateway stopped reading upstream instead of buffering 8 MB
    assert g.records[-1].error is None
