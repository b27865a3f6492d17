"""FrontConn driven directly with a recording transport: buffering cost, back-pressure, pipelining."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from lanewatch.collector.gateway.front.connection import FrontConn, FrontLimits, Handler, Request, Response
from lanewatch.collector.gateway.front.errors import error_body
from lanewatch.collector.gateway.front.listener import FrontServer

MB = 1024 * 1024


class Transport(asyncio.Transport):
    """Keeps what is written; tells the protocol to pause above `high` unsent bytes, like asyncio's."""

    def __init__(self, protocol: FrontConn, high: int) -> None:
        super().__init__()
        self.protocol, self.high = protocol, high
        self.unsent = 0
        self.written: list[bytes] = []
        self.reading, self.closing, self.paused = True, False, False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))
        self.unsent += len(data)
        if self.unsent > self.high and not self.paused:
            self.paused = True
            self.protocol.pause_writing()

    def flush(self) -> None:
        """The client read everything written so far."""
        self.unsent = 0
        if self.paused:
            self.paused = False
            self.protocol.resume_writing()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = high or self.high

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def _route(bodies: list[bytes], answer: bytes = b"{}") -> Any:
    def route(method: str, path: str) -> Handler | Response:
        if path == "/missing":
            return Response(404, b"{}")

        def handler(request: Request, _conn: FrontConn) -> Response:
            bodies.append(request.body)
            return Response(200, answer)

        return handler

    return route


def _conn(route: Any, max_body: int = 32 * MB) -> tuple[FrontConn, Transport]:
    limits = FrontLimits(max_body=max_body)
    conn = FrontConn(route, limits, error_body, FrontServer(route, limits, error_body))
    transport = Transport(conn, limits.high_water)
    conn.connection_made(transport)
    return conn, transport


async def test_a_body_in_many_small_reads_costs_linear_time() -> None:
    size, piece = 16 * MB, 1400
    for framing in ("length", "chunked"):
        bodies: list[bytes] = []
        conn, _t = _conn(_route(bodies))
        if framing == "length":
            raw = b"POST /x HTTP/1.1\r\nHost: g\r\nContent-Length: %d\r\n\r\n" % size + b"a" * size
        else:
            chunks = b"".join(b"%x\r\n%b\r\n" % (n, b"a" * n) for n in [MB] * (size // MB))
            raw = b"POST /x HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
        cpu = time.process_time()
        for at in range(0, len(raw), piece):
            conn.data_received(raw[at : at + piece])
        cpu = time.process_time() - cpu
        assert len(bodies) == 1 and len(bodies[0]) == size
        # Copying the whole buffer on each read (bytes +=) took ~8 s here; linear takes ~0.1 s.
        assert cpu < 2.0, (framing, cpu)


async def test_pipelined_answers_stop_while_the_client_is_not_reading() -> None:
    bodies: list[bytes] = []
    conn, transport = _conn(_route(bodies, b"x" * 100_000))
    conn.data_received(
        b"".join(b"POST /r HTTP/1.1\r\nHost: g\r\nContent-Length: 2\r\n\r\n%02d" % i for i in range(50))
    )
    assert len(bodies) == 3 and not transport.reading  # 300 KB written > the 256 KiB mark: wait
    conn.data_received(b"GET /more HTTP/1.1\r\nHost: g\r\n\r\n")  # what was in flight still comes in
    assert len(bodies) == 3
    while transport.paused:
        transport.flush()  # the client reads: the next few are answered
    assert len(bodies) == 51 and transport.reading
    assert bodies[:50] == [b"%02d" % i for i in range(50)]


async def test_many_pipelined_requests_answered_at_once_do_not_recurse() -> None:
    bodies: list[bytes] = []
    conn, transport = _conn(_route(bodies))
    n = sys.getrecursionlimit() * 2
    conn.data_received(
        b"GET /missing HTTP/1.1\r\nHost: g\r\n\r\n" * n + b"GET /ok HTTP/1.1\r\nHost: g\r\n\r\n"
    )
    written = b"".join(transport.written)
    assert written.count(b"HTTP/1.1 404 ") == n and written.count(b"HTTP/1.1 200 ") == 1
    assert json.loads(written.rsplit(b"\r\n\r\n", 1)[1]) == {} and len(bodies) == 1


async def test_nothing_pipelined_after_a_request_that_closes_is_read() -> None:
    bodies: list[bytes] = []
    conn, transport = _conn(_route(bodies))
    conn.data_received(
        b"POST /a HTTP/1.1\r\nHost: g\r\nContent-Length: 1\r\nConnection: close\r\n\r\na"
        b"POST /b HTTP/1.1\r\nHost: g\r\nContent-Length: 1\r\n\r\nb"
    )
    assert bodies == [b"a"] and transport.closing
    assert b"".join(transport.written).count(b"HTTP/1.1 ") == 1
