"""Hostile HTTP/1.1 against a real gateway on 127.0.0.1, over raw sockets.

Smuggling attempts never reach the upstream (nor does the lane's API key go out for them),
header bytes pass unchanged, pipelining is a loop that respects the client's reading speed,
and heads and connections are bounded in time and number.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from lanewatch.collector.gateway.front.connection import FrontConn, FrontLimits, Handler, Request, Response
from lanewatch.collector.gateway.front.errors import error_body
from lanewatch.collector.gateway.front.listener import FrontServer

from .gateway_harness import chat_body, eventually, gateway_server

pytestmark = pytest.mark.integration

KEY = "lane-secret-key-123"
ANSWER = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()


class RawUpstream:
    """An upstream that keeps every byte it receives and answers each request with one JSON body."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.heads: list[bytes] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer requests on one connection until it closes."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.received += head
                self.heads.append(head)
                match = re.search(rb"(?i)\r\ncontent-length: *([0-9]+)", head)
                body = await reader.readexactly(int(match[1])) if match else b""
                self.received += body
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
                writer.write(b"Content-Length: %d\r\n\r\n%b" % (len(ANSWER), ANSWER))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def raw_upstream() -> AsyncIterator[tuple[RawUpstream, str]]:
    """A RawUpstream on an ephemeral port: (it, its base URL with a path prefix)."""
    up = RawUpstream()
    server = await asyncio.start_server(up.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield up, f"http://127.0.0.1:{port}/pre"
    finally:
        server.close()


async def exchange(port: int, raw: bytes, within_s: float = 5.0) -> bytes:
    """Send `raw`, then read until the server closes (at most `within_s`)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    got = b""
    try:
        async with asyncio.timeout(within_s):
            while data := await reader.read(65536):
                got += data
    finally:
        writer.close()
    return got


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _chat(extra: bytes = b"", body: bytes = b"") -> bytes:
    body = body or json.dumps(chat_body(stream=False)).encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    )


SMUGGLED = b"GET /smuggled/admin HTTP/1.1\r\nHost: up\r\nContent-Length: 0\r\n\r\n"


@pytest.mark.parametrize(
    "extra",
    [
        b"X-Foo: a\n\n"
        + SMUGGLED.replace(b"\r\n", b"\n"),  # bare LF in a value: two requests to an LF-reader
        b"X-Foo: a\r\r" + SMUGGLED[:-4].replace(b"\r\n", b"\r") + b"\r\n",  # bare CR
        b"X-Foo: a\x00b\r\n",  # NUL in a value
        b"X\x01Foo: a\r\n",  # a CTL in a name
        b"X Foo: a\r\n",  # a space in a name
        b"Transfer-Encoding: chunked\r\n",  # beside Content-Length
        b"Content-Length: 0\r\n",  # conflicting with the real one
    ],
)
async def test_smuggling_never_reaches_the_upstream_nor_gets_the_lane_key(
    tmp_path: Path, extra: bytes
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    async with (
        raw_upstream() as (up, url),
        # No model discovery: its GET /v1/models carries the lane key too; this counts proxied requests.
        gateway_server(
            {"fast": {"upstreams": [url], "api_key_file": key_file}}, model_discovery={"enabled": False}
        ) as g,
    ):
        got = await exchange(_port(g.url), _chat(extra) + SMUGGLED)
        assert got.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in got.split(b"\r\n\r\n")[0]
        assert got.count(b"HTTP/1.1 ") == 1  # nothing after the refusal was read as a request
        assert b"smuggled" not in up.received and KEY.encode() not in up.received
        good = await exchange(_port(g.url), _chat(b"Connection: close\r\n"))
        assert good.startswith(b"HTTP/1.1 200 ")
    posts = [h for h in up.heads if h.startswith(b"POST ")]
    assert len(posts) == 1 and b"smuggled" not in up.received  # only the good request went upstream
    assert up.received.count(KEY.encode()) == 1 and not any(b"smuggled" in h for h in up.heads)


async def test_header_bytes_reach_the_upstream_unchanged() -> None:
    odd = b"X-Utf8: Jos\xc3\xa9\r\nX-Latin1: caf\xe9\r\nX-Dup: 1\r\nX-Dup: 2\r\n"
    async with raw_upstream() as (up, url), gateway_server({"fast": [url]}) as g:
        got = await exchange(_port(g.url), _chat(odd + b"Connection: close\r\n"))
    assert got.startswith(b"HTTP/1.1 200 ")
    (head,) = [h for h in up.heads if h.startswith(b"POST ")]
    assert b"\r\nX-Utf8: Jos\xc3\xa9\r\n" in head and b"\r\nX-Latin1: caf\xe9\r\n" in head
    assert b"\r\nX-Dup: 1\r\nX-Dup: 2\r\n" in head  # repeated headers kept, in order


# ---------------------------------------------------------------- the front server alone

CALLS: list[str] = []
BIG = b"x" * (1024 * 1024)


def _route(method: str, path: str) -> Handler | Response:
    if path == "/missing":
        return Response(404, b"{}")
    if path == "/big":
        return _big
    return _echo


def _big(request: Request, _conn: FrontConn) -> Response:
    CALLS.append(request.target)
    return Response(200, BIG, content_type="text/plain")


async def _echo(request: Request, _conn: FrontConn) -> Response:
    return Response(200, json.dumps({"path": request.path, "body": request.body.decode()}).encode())


@asynccontextmanager
async def front(**limits: float) -> AsyncIterator[tuple[FrontServer, int]]:
    server = FrontServer(_route, FrontLimits(**{"max_body": 1000, **limits}), error_body)  # type: ignore[arg-type]
    port = await server.start("127.0.0.1", 0)
    try:
        yield server, port
    finally:
        await server.shutdown()


def _status(got: bytes) -> int:
    return int(got[9:12])


@pytest.mark.parametrize(
    "raw",
    [
        b"POST /x HTTP/1.1\r\nHost: g\r\nContent-Length: \xb2\r\n\r\n",  # latin-1 "²": str.isdigit takes it
        "POST /x HTTP/1.1\r\nHost: g\r\nContent-Length: ٣\r\n\r\n".encode(),  # an Arabic-Indic 3, UTF-8
        b"POST /x HTTP/1.1\r\nHost: g\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"POST /x HTTP/1.1\r\nHost: g\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",
        *(
            b"POST /x HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n"
            + size
            + b"\r\n"
            + b"x" * 57
            + b"\r\n0\r\n\r\n"
            for size in (b"0x39", b"3_9", b"+39", b" 39 ", b"39 ", b"-0", b"0" * 5000 + b"39")
        ),
        b"POST /x HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n1;e="
        + b"v" * 60_000
        + b"\r\nx\r\n0\r\n\r\n",
        b"POST /x HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
        + b"T: v\r\n" * 3000
        + b"\r\n",
        b"GET /x HTTP/1.1\r\n\r\n",  # no Host
        b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a\r\nBad Name: v\r\n\r\n",
        b"GET /x\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /x HTTP/1.1\nHost: a\n\n",
    ],
)
async def test_malformed_requests_get_400_and_the_connection_closes(raw: bytes) -> None:
    async with front() as (_server, port):
        got = await exchange(port, raw)
    head, _, body = got.partition(b"\r\n\r\n")
    assert _status(got) == 400 and b"Connection: close" in head, got[:200]
    assert json.loads(body)["error"]["code"] == 400


async def test_hundreds_of_pipelined_requests_are_all_answered_in_order() -> None:
    raw = b"".join(b"GET /missing?%d HTTP/1.1\r\nHost: g\r\n\r\n" % i for i in range(400))
    raw += b"GET /last HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"
    async with front() as (_server, port):
        got = await exchange(port, raw, within_s=20)
    assert got.count(b"HTTP/1.1 404 ") == 400 and got.count(b"HTTP/1.1 200 ") == 1
    assert got.rindex(b"HTTP/1.1 404 ") < got.index(b"HTTP/1.1 200 ")


async def test_a_client_that_does_not_read_stops_the_reading_of_its_pipelined_requests() -> None:
    CALLS.clear()
    raw = b"".join(b"GET /big?%d HTTP/1.1\r\nHost: g\r\n\r\n" % i for i in range(100))
    async with front() as (_server, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1024)
        writer.write(raw)
        await writer.drain()
        await asyncio.sleep(1.0)  # the client reads nothing meanwhile
        # Socket buffers and one high-water mark hold a few 1 MiB answers, not 100 of them.
        assert 1 <= len(CALLS) <= 60, len(CALLS)  # kernel buffers vary by host
        got = 0
        async with asyncio.timeout(30):
            while got < 100 * len(BIG):
                got += len(await reader.read(1 << 20))
        writer.close()
    in_order = [f"/big?{i}" for i in range(100)]
    assert in_order == CALLS  # then every one, in order


async def test_a_request_head_sent_slowly_gets_408_then_the_connection_closes() -> None:
    async with front(head_timeout_s=0.5, keepalive_s=60) as (_server, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        t0 = time.monotonic()
        got = b""
        async with asyncio.timeout(10):
            for byte in b"GET /a HTTP/1.1\r\nHost: g\r\nX-Slow: " + b"y" * 200:
                writer.write(bytes([byte]))
                await asyncio.sleep(0.05)
                if reader.at_eof() or writer.is_closing():
                    break
                try:
                    got += await asyncio.wait_for(reader.read(4096), 0.001)
                except TimeoutError:
                    continue
                if got:
                    break
            got += await reader.read()
        elapsed = time.monotonic() - t0
        writer.close()
    assert _status(got) == 408 and b"Connection: close" in got
    assert 0.5 <= elapsed < 5.0


async def test_a_connection_that_sends_nothing_is_closed_after_the_head_timeout() -> None:
    async with front(head_timeout_s=0.3, keepalive_s=60) as (server, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # closed, without an answer
        writer.close()
        assert await eventually(lambda: not server.conns)


async def test_past_max_connections_a_new_client_gets_503_and_the_others_keep_working() -> None:
    async with front(max_connections=3) as (server, port):
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        assert await eventually(lambda: len(server.conns) == 3)
        got = await exchange(port, b"")
        assert _status(got) == 503 and b"Connection: close" in got and server.refused_total == 1
        reader, writer = idle[0]
        writer.write(b"GET /a HTTP/1.1\r\nHost: g\r\n\r\n")
        assert b"200 OK" in await asyncio.wait_for(reader.readuntil(b"}"), 5)
        for _, w in idle:
            w.close()
        assert await eventually(lambda: not server.conns)
        got = await exchange(port, b"GET /b HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n")
        assert _status(got) == 200  # room again


async def test_the_gateway_takes_its_head_timeout_and_connection_cap_from_its_config() -> None:
    async with (
        raw_upstream() as (_up, url),
        gateway_server({"fast": [url]}, max_connections=1, head_timeout_s=0.3) as g,
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", _port(g.url))
        writer.write(b"GET /healthz HTTP/1.1\r\nHo")  # one connection open, its head unfinished
        refused = await exchange(_port(g.url), b"")
        async with asyncio.timeout(5):
            timed_out = await reader.read()
        writer.close()
        malformed = await exchange(_port(g.url), b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        counted = dict(g.gw.stats.refused)
    assert _status(refused) == 503 and _status(timed_out) == 408 and _status(malformed) == 400
    # What lanewatch_gateway_refused_requests_total{code} exports.
    assert counted == {"503": 1, "408": 1, "400": 1}
