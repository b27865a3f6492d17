"""The gateway's own HTTP/1.1 server (collector/gateway/front/connection.py) spoken to over raw sockets."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from lanewatch.collector.gateway.front.connection import FrontConn, FrontLimits, Handler, Request, Response
from lanewatch.collector.gateway.front.errors import error_body
from lanewatch.collector.gateway.front.listener import FrontServer
from lanewatch.collector.record.timing import ErrorKind

from .gateway_harness import chat_body, eventually, one_lane

pytestmark = pytest.mark.integration


async def _echo(request: Request, _conn: FrontConn) -> Response:
    return Response(200, json.dumps({"path": request.path, "body": request.body.decode()}).encode())


def _route(method: str, path: str) -> Handler | Response:
    if path == "/missing":
        return Response(404, b"{}")
    return _echo


@asynccontextmanager
async def front(**limits: float) -> AsyncIterator[int]:
    server = FrontServer(_route, FrontLimits(**{"max_body": 100, **limits}), error_body)  # type: ignore[arg-type]
    port = await server.start("127.0.0.1", 0)
    try:
        yield port
    finally:
        await server.shutdown()


async def _exchange(port: int, raw: bytes, until: bytes = b"") -> bytes:
    """Send `raw`; read until `until` appears or the server closes (5 s at most)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    got = b""
    try:
        async with asyncio.timeout(5):
            while not (until and until in got):
                data = await reader.read(65536)
                if not data:
                    break
                got += data
    finally:
        writer.close()
    return got


def _bodies(raw: bytes) -> list[dict[str, str]]:
    """The JSON bodies of Content-Length framed responses, in order."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        out.append(json.loads(rest[:length]))
        raw = rest[length:]
    return out


async def test_pipelined_requests_are_answered_in_order_on_one_connection() -> None:
    raw = (
        b"POST /a HTTP/1.1\r\nHost: g\r\nContent-Length: 3\r\n\r\none"
        b"POST /b HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n3\r\ntwo\r\n0\r\n\r\n"
        b"GET /c HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"
    )
    async with front() as port:
        got = await _exchange(port, raw)
    assert [(b["path"], b["body"]) for b in _bodies(got)] == [("/a", "one"), ("/b", "two"), ("/c", "")]
    assert got.count(b"Connection: close") == 1  # only the last asked for it


async def test_expect_continue_gets_the_interim_answer_before_the_body_is_sent() -> None:
    async with front() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /x HTTP/1.1\r\nHost: g\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"ok")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        writer.close()
    assert head.startswith(b"HTTP/1.1 200 OK")


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"POST /x HTTP/1.1\r\nHost: g\r\nContent-Length: 101\r\n\r\n", 413),  # over max_body: not even read
        (b"POST /x HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n" + b"x" * 101, 413),
        (b"POST /x HTTP/1.1\r\nHost: g\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"BREW /x HTCPCP/1.0\r\n\r\n", 400),
        (b"POST /x HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    ],
)
async def test_unreadable_requests_get_an_openai_error_and_the_connection_closes(
    raw: bytes, status: int
) -> None:
    async with front() as port:
        got = await _exchange(port, raw)  # reads until the server closes
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()) and b"Connection: close" in head
    assert json.loads(body)["error"]["code"] == status


async def test_an_idle_keep_alive_connection_is_closed() -> None:
    async with front(keepalive_s=0.2) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /a HTTP/1.1\r\nHost: g\r\n\r\n")
        await asyncio.wait_for(reader.readuntil(b"}"), 5)
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server, well within 5 s
        writer.close()


async def test_http10_client_gets_the_stream_unframed_and_the_connection_closed() -> None:
    body = json.dumps(chat_body(3)).encode()
    raw = b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
    async with one_lane() as (_up, g, _s):
        got = await _exchange(int(g.url.rsplit(":", 1)[1]), raw)  # until the server closes
    head, _, stream = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"Transfer-Encoding" not in head
    assert stream.count(b'"content":"t') == 3 and stream.endswith(b"data: [DONE]\n\n")
    assert g.records[-1].error is None


async def test_routes_answer_404_and_405_in_openai_json() -> None:
    async with one_lane() as (_up, g, s):
        async with s.get(f"{g.url}/v1/nothing") as r:
            assert r.status == 404 and (await r.json())["error"]["code"] == 404
        async with s.get(f"{g.url}/v1/chat/completions") as r:
            assert r.status == 405 and r.headers["Allow"] == "POST"
            assert "GET /v1/chat/completions" in (await r.json())["error"]["message"]


async def test_a_client_gone_right_after_its_request_leaves_nothing_behind() -> None:
    body = json.dumps(chat_body(5)).encode()
    raw = b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
    async with one_lane(first_ms=300) as (up, g, s):
        async with s.post(g.url + "/v1/chat/completions", json=chat_body(1)) as r:
            await r.read()  # a kept-alive upstream connection: the next request leaves at once
        _reader, writer = await asyncio.open_connection("127.0.0.1", int(g.url.rsplit(":", 1)[1]))
        writer.write(raw)
        await writer.drain()
        assert await eventually(lambda: len(up.requests) == 2)  # the gateway sent it upstream
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # a reset, well before the first token at 300 ms
        assert await eventually(lambda: len(g.records) == 2)
        log = up.last()
        await asyncio.wait_for(log.ended.wait(), 3)
    assert log.cancelled and not log.finished
    assert g.records[-1].error is ErrorKind.CLIENT_DISCONNECT
    assert all(u.outstanding == 0 for u in g.gw.pools["slow"].upstreams)
