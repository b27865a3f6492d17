"""The tap bench's load: N closed-loop streaming clients, lean enough not to be the bottleneck.

Each client holds one keep-alive connection (all opened before the clock starts), starts
staggered over one request's length so the streams do not tick in lockstep, and sends the
next request as soon as the last one ended. Per request it stamps TTFT (request written →
first content event read); per content event the one-way delay from the upstream's write
(the `created` stamp bench/sse_light.py puts in, same monotonic clock) to its arrival here.
Plain asyncio protocols and byte searches: no HTTP library, no JSON decoding.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field

__all__ = ["LoadResult", "close_all", "open_connections", "run_load"]

_STAMP = re.compile(rb'"created":(\d+)')
_END = b"\r\n0\r\n\r\n"
_CONNECT_BATCH = 64  # the gateway's listen backlog is aiohttp's 128: never flood it with SYNs


@dataclass
class LoadResult:
    """What one load run saw."""

    ttft_s: list[float] = field(default_factory=list)
    delay_us: list[int] = field(default_factory=list)  # per content event: arrival − upstream write
    chunks: int = 0
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0  # from the clock's start to the last response's end

    @property
    def chunks_per_s(self) -> float:
        """Content events delivered per second."""
        return self.chunks / self.seconds if self.seconds > 0 else 0.0


class _Conn(asyncio.Protocol):
    """One keep-alive connection; stamps the content events of the response in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] | None = None
        self.first: float | None = None
        self.delays: list[int] = []
        self.carry = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now_us = time.monotonic_ns() // 1000
        buf = self.carry + data if self.carry else data
        cut = buf.rfind(b"\n\n") + 2  # complete events only: a stamp split across reads waits
        events, self.carry = buf[:cut], buf[cut:][-256:]
        if events:
            stamps = _STAMP.findall(events)
            if stamps:
                if self.first is None:
                    self.first = now_us / 1e6
                self.delays += [now_us - int(s) for s in stamps]
        if buf.endswith(_END) and self.done is not None and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError(f"closed: {exc}"))


def _request(body: bytes) -> bytes:
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def open_connections(port: int, n: int) -> list[_Conn]:
    """`n` connections to 127.0.0.1:port, opened a batch at a time."""
    loop = asyncio.get_running_loop()
    conns: list[_Conn] = []
    for i in range(0, n, _CONNECT_BATCH):
        made = await asyncio.gather(
            *(loop.create_connection(_Conn, "127.0.0.1", port) for _ in range(min(_CONNECT_BATCH, n - i)))
        )
        conns += [c for _, c in made]
    return conns


async def _worker(
    conn: _Conn, start: float, offset: float, until: float, req: bytes, out: LoadResult
) -> None:
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start + offset - loop.time()))
    while loop.time() < until:
        conn.first, conn.delays, conn.carry = None, [], b""
        conn.done = loop.create_future()
        assert conn.transport is not None
        t0 = time.monotonic()
        conn.transport.write(req)
        try:
            await asyncio.wait_for(conn.done, 60)
        except (ConnectionError, TimeoutError):
            out.errors += 1
            return
        if conn.first is not None:
            out.ttft_s.append(conn.first - t0)
        out.delay_us += conn.delays
        out.chunks += len(conn.delays)
        out.requests += 1


async def run_load(conns: list[_Conn], seconds: float, stagger_s: float, chunks: int = 41) -> LoadResult:
    """Drive every connection for `seconds` (requests started by then run to their end)."""
    loop = asyncio.get_running_loop()
    body = {"model": "bench", "stream": True, "max_tokens": chunks}
    body["messages"] = [{"role": "user", "content": "hi"}]
    req = _request(json.dumps(body).encode())
    out = LoadResult()
    start = loop.time()
    until = start + seconds
    n = len(conns)
    await asyncio.gather(
        *(_worker(c, start, stagger_s * i / n, until, req, out) for i, c in enumerate(conns))
    )
    out.seconds = loop.time() - start
    return out


def close_all(conns: list[_Conn]) -> None:
    """Close every connection."""
    for c in conns:
        if c.transport is not None:
            c.transport.close()
