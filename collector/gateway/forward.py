"""Forwarding one admitted request upstream and its answer downstream, unbuffered.

The upstream connection (upstream.py) calls `_Downstream.payload` for each read; it
feeds the tap and writes the bytes to the client's socket in the same callback. The
handler coroutine only waits: for the head, for the end, for the client to drain when
it reads slower than upstream writes, or for a stall. Connection failures before a
byte was sent try the lane's next upstream; other failures before the response
started become OpenAI error JSON (502, 504), and after it an error frame.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from time import perf_counter

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

from lanewatch.collector.timing import ErrorKind, error_kind_for_status

from .content_tap import ContentTap
from .core import Gateway
from .errors import error_kind_of, error_response, sse_error_event, status_for
from .exchange import Exchange
from .http1 import HttpError, ResponseHead
from .leg import LegTimes
from .pool import LanePool, Upstream
from .tap import StreamTap
from .upstream import ConnectError, UpstreamConn, UpstreamGone

__all__ = ["forward"]

HIGH_WATER = 256 * 1024  # client socket buffer above which upstream reading pauses
_HOP_BACK = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "upgrade", "content-length", "date", "server"}
)
_UPSTREAM_FAILURES = (ErrorKind.TIMEOUT, ErrorKind.STALL, ErrorKind.TRUNCATED, ErrorKind.BAD_STREAM)


class _Downstream:
    """The client side of one stream: tap, frame, write; pause upstream on back-pressure."""

    __slots__ = ("chunked", "conn", "gone", "paused", "tap", "transport")

    def __init__(
        self, transport: asyncio.Transport, chunked: bool, tap: StreamTap, conn: UpstreamConn
    ) -> None:
        self.transport, self.chunked, self.tap, self.conn = transport, chunked, tap, conn
        self.gone = self.paused = False

    def payload(self, data: bytes) -> None:
        """Upstream payload: on to the client at once (the hot path)."""
        out, n = self.tap.feed(data)
        if out:
            self.write(out)
        if n:
            self.tap.content_written(perf_counter(), n)

    def write(self, out: bytes) -> None:
        """Write bytes to the client in its framing."""
        t = self.transport
        if t.is_closing():
            self.gone = True
            self.conn.abort()
            return
        t.write(b"%x\r\n%b\r\n" % (len(out), out) if self.chunked else out)
        if t.get_write_buffer_size() > HIGH_WATER:
            self.paused = True
            self.conn.pause()


async def forward(
    gw: Gateway, request: web.Request, ex: Exchange, body: bytes, headers: Mapping[str, str], strip: bool
) -> web.StreamResponse:
    """Send the request to the served lane's least-loaded upstream and stream its answer back."""
    pool = gw.pools[ex.decision.served_lane]
    tried: list[Upstream] = []
    while True:
        up = pool.pick(exclude=tried)
        if up is None:
            return _fail(ex, ErrorKind.CONNECT, f"lane {pool.lane!r} has no upstream to try")
        ex.upstream = up
        up.outstanding += 1
        try:
            return await _exchange(gw, request, ex, up, _request_bytes(up, request, headers, body), strip)
        except ConnectError as exc:  # nothing was sent: the next upstream may take it
            tried.append(up)
            kind = error_kind_of(exc)
            gw.stats.upstream_errors[(up.lane, up.name, kind.value)] += 1
            if len(tried) < len(pool.upstreams):
                continue
            return _fail(ex, kind, f"upstream {up.name} of lane {pool.lane!r}: {exc}")
        finally:
            up.outstanding -= 1
            _judge(pool, up, ex)


def _judge(pool: LanePool, up: Upstream, ex: Exchange) -> None:
    """Passive health: count the upstream's failure or success (a client hanging up is neither)."""
    if ex.error is ErrorKind.CLIENT_DISCONNECT:
        return
    if ex.status is None or ex.status >= 500 or ex.error in _UPSTREAM_FAILURES:
        pool.failed(up)
    else:
        pool.succeeded(up)


def _request_bytes(up: Upstream, request: web.Request, headers: Mapping[str, str], body: bytes) -> bytes:
    lines = [f"{request.method} {up.prefix}{request.raw_path} HTTP/1.1", f"Host: {up.host_header}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body


async def _exchange(
    gw: Gateway, request: web.Request, ex: Exchange, up: Upstream, raw: bytes, strip: bool
) -> web.StreamResponse:
    tls = gw.ssl[up.lane] if up.tls else None
    for _attempt in range(3):
        ex.leg = leg = LegTimes(start=perf_counter())
        conn = await gw.upstream.connect(up.host, up.port, tls, leg)
        leg.ready = perf_counter()
        conn.send(raw)
        leg.sent = perf_counter()
        try:
            async with asyncio.timeout(gw.cfg.read_timeout_s):
                head = await conn.head()
        except UpstreamGone as exc:
            if conn.reused and exc.fresh:
                continue  # a keep-alive connection the server had just closed: try a new one
            return _fail(ex, ErrorKind.TRUNCATED, f"upstream {up.name}: {exc}", conn)
        except HttpError as exc:
            return _fail(ex, ErrorKind.BAD_STREAM, f"upstream {up.name}: {exc}", conn)
        except TimeoutError:
            return _fail(
                ex, ErrorKind.TIMEOUT, f"upstream {up.name}: no answer within {gw.cfg.read_timeout_s} s", conn
            )
        except asyncio.CancelledError:
            conn.abort()
            ex.error = ErrorKind.CLIENT_DISCONNECT
            raise
        leg.headers = perf_counter()
        return await _respond(gw, request, ex, conn, head, strip)
    return _fail(ex, ErrorKind.TRUNCATED, f"upstream {up.name} kept closing its connections")


async def _respond(
    gw: Gateway, request: web.Request, ex: Exchange, conn: UpstreamConn, head: ResponseHead, strip: bool
) -> web.StreamResponse:
    ex.status, ex.error = head.status, error_kind_for_status(head.status)
    ex.request_id = head.get("x-request-id")
    ctype = (head.get("content-type") or "").split(";", 1)[0].strip().lower()
    if head.status >= 400 and ctype != "application/json":
        return await _wrap_error(gw, ex, conn, head)
    sse = ctype == "text/event-stream"
    resp = web.StreamResponse(status=head.status, reason=head.reason or None)
    for k, v in head.headers:
        if k.lower() not in _HOP_BACK:
            resp.headers.add(k, v)
    resp.headers.update(ex.lane_headers())
    if head.framing == "length" and not (sse and strip):
        resp.content_length = head.length
    elif request.version >= (1, 1):
        resp.enable_chunked_encoding()
    else:
        resp.force_close()
    tap = ex.tap = (ContentTap if gw.record_content else StreamTap)(ex.api, sse=sse, strip_usage=strip)
    sink: _Downstream | None = None
    try:
        writer = await resp.prepare(request)
        if writer is None or request.transport is None:
            raise ConnectionResetError("client went away before the response started")
        sink = _Downstream(request.transport, resp.chunked, tap, conn)
        conn.attach(sink)
        await _pump(gw, conn, sink, writer)
        rest = tap.flush()
        if rest:
            sink.write(rest)
        await resp.write_eof()
        gw.upstream.release(conn)
    except asyncio.CancelledError:  # the client went away (handler cancellation)
        conn.abort()
        ex.error = ErrorKind.CLIENT_DISCONNECT
        raise
    except ConnectionResetError:  # the client went away while we wrote
        conn.abort()
        ex.error = ErrorKind.CLIENT_DISCONNECT
    except (UpstreamGone, HttpError, TimeoutError) as exc:
        conn.abort()
        ex.error = _timeout_kind(tap) if isinstance(exc, TimeoutError) else error_kind_of(exc)
        await _end_broken(resp, sink if sse else None, ex.error, str(exc) or "upstream stalled")
        return resp
    if ex.error is None:
        ex.error = _verdict(tap, sse)
    return resp


async def _pump(gw: Gateway, conn: UpstreamConn, sink: _Downstream, writer: AbstractStreamWriter) -> None:
    """Wait while the body flows through `sink`: for its end, a drain, or a stall."""
    timeout = gw.cfg.read_timeout_s
    while not conn.done:
        reads = conn.reads
        try:
            await conn.wait_end(timeout)
        except UpstreamGone:
            if sink.gone:
                raise ConnectionResetError("client went away") from None
            raise
        if sink.gone:
            raise ConnectionResetError("client went away")
        if sink.paused:
            await writer.drain()
            sink.paused = False
            conn.resume()
        elif not conn.done and conn.reads == reads:
            raise TimeoutError(f"upstream sent nothing for {timeout} s")


async def _wrap_error(gw: Gateway, ex: Exchange, conn: UpstreamConn, head: ResponseHead) -> web.Response:
    """An upstream error that is not JSON (a proxy's HTML page, plain text) becomes OpenAI error JSON."""
    collected = _Collect()
    conn.attach(collected)
    with contextlib.suppress(UpstreamGone, HttpError):
        await conn.wait_end(5.0)
    if conn.done:
        gw.upstream.release(conn)
    else:
        conn.abort()
    name = ex.upstream.name if ex.upstream is not None else "?"
    message = f"upstream {name} answered {head.status} {head.reason}".rstrip()
    text = collected.text()
    if text:
        message = f"{message}: {text}"
    return error_response(head.status, message, headers=ex.lane_headers())


class _Collect:
    """A sink that keeps the first bytes of a small body."""

    def __init__(self) -> None:
        self.data = b""

    def payload(self, data: bytes) -> None:
        if len(self.data) < 300:
            self.data += data[: 300 - len(self.data)]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace").strip()


async def _end_broken(
    resp: web.StreamResponse, sink: _Downstream | None, kind: ErrorKind, reason: str
) -> None:
    """A stream that broke after its head went out: an error frame (SSE), then the end."""
    try:
        if sink is not None and not sink.gone:
            sink.write(sse_error_event(status_for(kind), f"upstream: {reason[:200]}"))
        await resp.write_eof()
    except (ConnectionResetError, RuntimeError):
        pass


def _timeout_kind(tap: StreamTap) -> ErrorKind:
    """Upstream went quiet past read_timeout_s: a stall between chunks, or no first content at all."""
    return ErrorKind.STALL if tap.first_content_at is not None else ErrorKind.TTFT_TIMEOUT


def _verdict(tap: StreamTap, sse: bool) -> ErrorKind | None:
    if sse and tap.stream_error:
        return ErrorKind.STREAM_ERROR
    if tap.bad_stream:
        return ErrorKind.BAD_STREAM
    if sse and not tap.done:
        return ErrorKind.TRUNCATED
    return None


def _fail(ex: Exchange, kind: ErrorKind, message: str, conn: UpstreamConn | None = None) -> web.Response:
    if conn is not None:
        conn.abort()
    status = status_for(kind)
    ex.status, ex.error = status, kind
    return error_response(status, message, headers=ex.lane_headers())
