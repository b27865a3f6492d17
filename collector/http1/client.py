"""Client HTTP/1.1 on bare asyncio: keep-alive connections that pass body bytes on as they arrive.

The gateway's upstream leg and the prober both run on it. Why not aiohttp's or httpcore's
client: their per-chunk path (a parser, a stream reader, a future and a task switch per read)
costs more CPU than the rest of the gateway together (bench/tap_overhead.py), and more than
blackbox_exporter spends on a whole probe (bench/probe_cost.py). Here `data_received` decodes
the framing and hands the payload to a sink in the same callback; a coroutine waits only for
the head, the end, or back-pressure. DNS, TCP and TLS are timed apart.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable
from time import perf_counter
from typing import Protocol, cast

from lanewatch.collector.common.errors import UpstreamError
from lanewatch.collector.http1.message import BodyParser, HeadReader, HttpError, ResponseHead
from lanewatch.collector.http1.phases import LegTimes

__all__ = ["BodySink", "ConnectFailed", "IdleConnections", "UpstreamClient", "UpstreamConn", "UpstreamGone"]

IDLE_REUSE_S = 2.0  # reuse an idle connection only this long: servers close idle ones (uvicorn: 5 s)
DNS_TTL_S = 10.0


class ConnectFailed(UpstreamError):
    """No connection could be made; nothing was sent. `stage` is dns | connect | connect_timeout | tls."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


class UpstreamGone(UpstreamError):
    """The connection closed before the response ended. `fresh`: no byte of a response had arrived."""

    def __init__(self, message: str, fresh: bool) -> None:
        super().__init__(message)
        self.fresh = fresh


class BodySink(Protocol):
    """Where body payload goes, synchronously, as it arrives."""

    def payload(self, data: bytes) -> None:
        """Take payload bytes; may call `conn.pause()` for back-pressure."""


class UpstreamConn(asyncio.Protocol):
    """One connection to one upstream; one request at a time."""

    def __init__(self, key: tuple[str, int, bool]) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.sink: BodySink | None = None
        self.idle_since = 0.0
        self.reused = False
        self.reads = 0  # body reads so far: the stall check compares it over time
        self._reader = HeadReader()
        self._head: ResponseHead | None = None
        self._body: BodyParser | None = None
        self._early: list[bytes] = []  # payload that came before a sink was attached
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._got_bytes = False
        self.head_at: float | None = None  # perf_counter when the response head was parsed
        self.closed = False

    # ---------------------------------------------------------------- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport; Nagle off so small requests leave at once."""
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no asyncio.Transport subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        """Parse the head, then pass each read's payload straight to the sink."""
        self._got_bytes = True
        try:
            if self._body is None:
                self._take_head(data)
                return
            self.reads += 1
            self._deliver(self._body.feed(data))
        except HttpError as exc:
            self._fail(exc)

    def eof_received(self) -> bool | None:
        """The server closed its side: the end of a close-framed body, or a broken response."""
        if self._body is not None and self._body.eof():
            self._wake()
        else:
            self._fail(self._gone("upstream closed the connection mid-response"))
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone; wake whoever waits."""
        self.closed = True
        if self._body is None or not self._body.done:
            self._fail(self._gone(f"upstream connection lost: {exc or 'closed'}"))

    # ---------------------------------------------------------------- used by the proxy
    def send(self, data: bytes) -> None:
        """Write a whole request."""
        assert self.transport is not None
        self._reader, self._head, self._body, self._early = HeadReader(), None, None, []
        self._error, self._got_bytes, self.sink, self.reads = None, False, None, 0
        self.head_at = None
        self.transport.write(data)

    async def head(self, timeout_s: float) -> ResponseHead:
        """Wait for the response head; TimeoutError after `timeout_s`."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self._head is None:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise TimeoutError(f"no response head within {timeout_s} s")
            await self._wait(left)
        return self._head

    def attach(self, sink: BodySink) -> None:
        """Send the body to `sink` from now on (with what came early)."""
        self.sink = sink
        early, self._early = self._early, []
        for data in early:
            sink.payload(data)

    async def wait_end(self, timeout_s: float | None) -> None:
        """Wait for the end of the body; None waits forever, else at most `timeout_s` once."""
        if self._body is not None and self._body.done:
            return
        await self._wait(timeout_s)

    @property
    def response_head(self) -> ResponseHead | None:
        """The response head once parsed (a sink reads it on the first payload)."""
        return self._head

    @property
    def done(self) -> bool:
        """The response body ended."""
        return self._body is not None and self._body.done

    @property
    def reusable(self) -> bool:
        """Whether the connection can carry another request."""
        return not self.closed and self.done and self._head is not None and self._head.keep_alive

    def pause(self) -> None:
        """Stop reading the upstream (the client is slower than it)."""
        if self.transport is not None:
            self.transport.pause_reading()
        self._wake()

    def resume(self) -> None:
        """Read the upstream again."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def wake(self) -> None:
        """Wake whoever waits on this connection: its sink saw something that moves a deadline."""
        self._wake()

    def abort(self) -> None:
        """Drop the connection at once (the client went away, or it stalled)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # ---------------------------------------------------------------- internals
    def _take_head(self, data: bytes) -> None:
        found = self._reader.feed(data)
        if found is None:
            return
        head, rest = found
        self._head, self._body, self.head_at = head, BodyParser(head), perf_counter()
        if rest:
            self._deliver(self._body.feed(rest))
        self._wake()

    def _gone(self, message: str) -> Exception:
        """The error of a connection that ended early: a head cut short is malformed, not a drop."""
        if self._body is None and self._reader.started:
            return HttpError("upstream closed the connection inside the response head")
        return UpstreamGone(message, fresh=not self._got_bytes)

    def _deliver(self, payload: bytes) -> None:
        if payload:
            if self.sink is not None:
                self.sink.payload(payload)
            else:
                self._early.append(payload)
        if self._body is not None and self._body.done:
            self._wake()

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self, timeout_s: float | None = None) -> None:
        """Until woken, or `timeout_s` passed (then quietly: the caller checks what changed)."""
        if self._error is not None:
            raise self._error
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout_s is None else loop.call_later(timeout_s, _expire, waiter)
        try:
            await waiter  # a timer, not asyncio.wait_for: this runs a few times per request
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        if self._error is not None:
            raise self._error


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class IdleConnections:
    """Kept-alive connections by (host, port, tls): the newest is reused while it is fresh and open."""

    def __init__(self, reuse_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.reuse_s = reuse_s  # servers close idle connections (uvicorn after 5 s)
        self._clock = clock
        self._idle: dict[tuple[str, int, bool], list[UpstreamConn]] = {}

    def take(self, key: tuple[str, int, bool]) -> UpstreamConn | None:
        """A kept connection for `key` the server has not closed, or None; never waits."""
        idle = self._idle.get(key)
        now = self._clock()
        while idle:
            conn = idle.pop()
            if not conn.closed and now - conn.idle_since < self.reuse_s:
                conn.reused = True
                return conn
            conn.abort()
        return None

    def keep(self, conn: UpstreamConn, limit: int | None = None) -> None:
        """Keep `conn` when it can carry another request (and fewer than `limit` wait), else close it."""
        idle = self._idle.setdefault(conn.key, [])
        if not conn.reusable or (limit is not None and len(idle) >= limit):
            conn.abort()
            return
        conn.idle_since = self._clock()
        conn.sink = None
        idle.append(conn)

    def close(self) -> None:
        """Close every kept connection."""
        for conns in self._idle.values():
            for conn in conns:
                conn.abort()
        self._idle.clear()


class UpstreamClient:
    """Keep-alive connection pools per (host, port, tls) and a small DNS cache."""

    def __init__(self, connect_timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._connect_timeout = connect_timeout_s
        self._clock = clock
        self._idle = IdleConnections(IDLE_REUSE_S, clock)
        self._dns: dict[tuple[str, int], tuple[float, list[str]]] = {}

    def take_idle(self, host: str, port: int, tls: bool, leg: LegTimes) -> UpstreamConn | None:
        """A kept-alive connection that is still fresh, or None; never waits."""
        conn = self._idle.take((host, port, tls))
        if conn is not None:
            leg.reused = True
        return conn

    async def connect(self, host: str, port: int, tls: ssl.SSLContext | None, leg: LegTimes) -> UpstreamConn:
        """An idle connection if a fresh one is kept, else a new one (timing DNS, TCP and TLS)."""
        conn = self.take_idle(host, port, tls is not None, leg)
        return conn if conn is not None else await self._new(host, port, tls, leg)

    def release(self, conn: UpstreamConn) -> None:
        """Keep `conn` for reuse when it can carry another request, else close it."""
        self._idle.keep(conn)

    def close(self) -> None:
        """Close every idle connection."""
        self._idle.close()

    async def _new(self, host: str, port: int, tls: ssl.SSLContext | None, leg: LegTimes) -> UpstreamConn:
        loop = asyncio.get_running_loop()
        leg.dns_start = perf_counter()
        addrs = await self._resolve(host, port)
        leg.dns_end = leg.conn_start = perf_counter()
        conn = UpstreamConn((host, port, tls is not None))
        try:
            async with asyncio.timeout(self._connect_timeout):
                transport, _ = await loop.create_connection(lambda: conn, addrs[0], port)
        except TimeoutError:
            raise ConnectFailed(
                "connect_timeout", f"no TCP connection to {host}:{port} within {self._connect_timeout} s"
            ) from None
        except OSError as exc:
            stage = "connect_refused" if isinstance(exc, ConnectionRefusedError) else "connect"
            raise ConnectFailed(stage, f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        leg.conn_end = perf_counter()
        if conn.transport is None:  # uvloop calls connection_made a loop turn after connecting
            conn.transport = transport
        if tls is not None:
            await self._start_tls(conn, transport, tls, host)
            leg.tls_end = perf_counter()
        return conn

    async def _start_tls(
        self, conn: UpstreamConn, transport: asyncio.Transport, tls: ssl.SSLContext, host: str
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                tls_transport = await loop.start_tls(transport, conn, tls, server_hostname=host)
        except (ssl.SSLError, ssl.CertificateError, OSError, TimeoutError) as exc:
            transport.abort()
            raise ConnectFailed("tls", f"TLS with {host} failed: {exc}") from None
        assert tls_transport is not None
        conn.transport = tls_transport

    async def _resolve(self, host: str, port: int) -> list[str]:
        now = self._clock()
        cached = self._dns.get((host, port))
        if cached is not None and now - cached[0] < DNS_TTL_S:
            return cached[1]
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConnectFailed("dns", f"cannot resolve {host}: {exc}") from None
        addrs = [str(info[4][0]) for info in infos]
        self._dns[(host, port)] = (now, addrs)
        return addrs
