"""Forwarding one admitted request upstream and its answer downstream, unbuffered.

The upstream connection (http1/client.py) calls `_Downstream.payload` for each read; it
feeds the tap and writes the bytes to the client's connection (front/connection.py) in the same
callback. The handler coroutine only waits: for the head, for the end, for the client to
drain when it reads slower than upstream writes, or for a stall. The last bytes go out
with the end of the body in one write. Connection failures before a byte was sent try
the lane's next upstream; other failures before the response started become OpenAI
error JSON (502, 504), and after it an error frame.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from ssl import SSLContext
from time import perf_counter
from typing import TYPE_CHECKING, Protocol

from lanewatch.collector.common.headers import REQUEST_ID
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.http1.client import ConnectFailed, UpstreamClient, UpstreamConn, UpstreamGone
from lanewatch.collector.http1.message import HttpError, ResponseHead
from lanewatch.collector.http1.phases import LegTimes
from lanewatch.collector.openai_api.error_detail import clean, error_detail
from lanewatch.collector.record.timing import ErrorKind, error_kind_for_status

from ..front.connection import Response
from ..front.errors import error_kind_of, error_response, sse_error_event, status_for
from .exchange import Exchange
from .pool import LanePool, Upstream
from .response_head import check_head, client_headers

if TYPE_CHECKING:  # handed over by the request path: the next stage's types, for the checker only
    from ..tap.stream_scan import StreamTap

__all__ = ["Client", "Flight", "Forwarding", "UpstreamRequest", "begin", "forward"]


class UpstreamCounts(Protocol):
    """The counter forwarding adds to."""

    @property
    def upstream_errors(self) -> Counter[tuple[str, str, str]]: ...  # lane, upstream, kind


class Forwarding(Protocol):
    """What forwarding reads of the gateway: its settings, lanes' pools and TLS, the upstream
    connections, and the tap each answer is read through."""

    @property
    def cfg(self) -> GatewayConfig: ...
    @property
    def pools(self) -> Mapping[str, LanePool]: ...
    @property
    def ssl(self) -> Mapping[str, SSLContext]: ...
    @property
    def upstream(self) -> UpstreamClient: ...
    @property
    def tap_class(self) -> type[StreamTap]: ...
    @property
    def stats(self) -> UpstreamCounts: ...


class Client(Protocol):
    """The client's side of an answer, as forwarding writes it: its connection (front/connection.py
    `FrontConn`), or a stand-in that holds the answer back (rescue.py)."""

    @property
    def closed(self) -> bool: ...
    @property
    def paused(self) -> bool: ...
    def start(self, status: int, reason: str, headers: list[tuple[str, str]], length: int | None) -> None: ...
    def send(self, payload: bytes) -> None: ...
    def finish(self, tail: bytes = b"") -> None: ...
    async def drain(self) -> None: ...


_UPSTREAM_FAILURES = (ErrorKind.TIMEOUT, ErrorKind.STALL, ErrorKind.TRUNCATED, ErrorKind.BAD_STREAM)


class _Downstream:
    """The client side of one stream: tap, write; pause upstream on back-pressure."""

    __slots__ = ("conn", "front", "gone", "paused", "tap")

    def __init__(self, front: Client, tap: StreamTap, conn: UpstreamConn) -> None:
        self.front, self.tap, self.conn = front, tap, conn
        self.gone = self.paused = False

    def payload(self, data: bytes) -> None:
        """Upstream payload: on to the client at once (the hot path)."""
        out, n = self.tap.feed(data)
        if n:  # stamped before the write: the front sees the first token's time with its bytes
            self.tap.content_written(perf_counter(), n)
        if out:
            self.write(out)

    def write(self, out: bytes) -> None:
        """Write bytes to the client (front/connection.py frames them)."""
        front = self.front
        if front.closed:
            self.gone = True
            self.conn.abort()
            return
        front.send(out)
        if front.paused:
            self.paused = True
            self.conn.pause()


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    """What goes upstream for one admitted request, whichever upstream of the lane takes it."""

    method: str
    target: str  # path and query, as the client sent them; the upstream's prefix goes before
    headers: Mapping[str, str]
    body: bytes
    strip_usage: bool  # the gateway asked for the usage chunk itself: the client does not get it

    def encode(self, up: Upstream) -> bytes:
        """The request's bytes for `up`: its line, Host, the headers, Content-Length and the body."""
        lines = [f"{self.method} {up.prefix}{self.target} HTTP/1.1", f"Host: {up.host_header}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        lines.append(f"Content-Length: {len(self.body)}")
        text = "\r\n".join(lines) + "\r\n\r\n"
        try:
            return text.encode("latin-1") + self.body  # the client's bytes exactly: heads are read as latin-1
        except UnicodeEncodeError:  # only a value of the gateway's own (an API key) can be past latin-1
            return b"\r\n".join(_wire(line) for line in lines) + b"\r\n\r\n" + self.body


@dataclass(slots=True)
class Flight:
    """One request on its way: what it sends, the upstream it goes to, its bytes for that upstream,
    and the connection it already left on (if any)."""

    request: UpstreamRequest
    up: Upstream | None
    raw: bytes = b""
    sent: UpstreamConn | None = None


def begin(gw: Forwarding, ex: Exchange, request: UpstreamRequest) -> Flight:
    """Pick the served lane's least-loaded upstream; on a kept-alive connection, send at once.

    Runs in the callback that read the client's request, so the request leaves without
    waiting for the handler's task to be scheduled behind whatever else the loop has ready.
    """
    up = _pick(gw.pools[ex.decision.served_lane], ex, ())
    if up is None:
        return Flight(request, None)
    flight = Flight(request, up, request.encode(up))
    ex.leg = leg = LegTimes(start=perf_counter())
    flight.sent = gw.upstream.take_idle(up.host, up.port, up.tls, leg)
    if flight.sent is not None:
        _send(flight.sent, flight.raw, leg)
    return flight


async def forward(gw: Forwarding, front: Client, ex: Exchange, flight: Flight) -> Response | None:
    """Finish what `begin` started: the answer streamed back; another upstream when one cannot connect."""
    pool = gw.pools[ex.decision.served_lane]
    tried: list[Upstream] = []
    while (up := flight.up) is not None:
        try:
            return await _exchange(gw, front, ex, flight, up)
        except ConnectFailed as exc:  # nothing was sent: the next upstream may take it
            tried.append(up)
            kind = error_kind_of(exc)
            gw.stats.upstream_errors[(up.lane, up.name, kind.value)] += 1
            if len(tried) >= len(pool.upstreams):
                return _fail(ex, kind, f"upstream {up.name} of lane {pool.lane!r}: {exc}")
        finally:
            up.outstanding -= 1
            _judge(pool, up, ex)
        flight.up, flight.sent = _pick(pool, ex, tried), None
        if flight.up is not None:
            flight.raw = flight.request.encode(flight.up)
    return _fail(ex, ErrorKind.CONNECT, f"lane {pool.lane!r} has no upstream to try")


def _pick(pool: LanePool, ex: Exchange, tried: Iterable[Upstream]) -> Upstream | None:
    up = pool.pick(exclude=tried)
    if up is not None:
        ex.upstream = up
        up.outstanding += 1
    return up


def _send(conn: UpstreamConn, raw: bytes, leg: LegTimes) -> None:
    leg.ready = perf_counter()
    conn.send(raw)
    leg.sent = perf_counter()


def _judge(pool: LanePool, up: Upstream, ex: Exchange) -> None:
    """Passive health: count the upstream's failure or success (a client hanging up is neither)."""
    if ex.error is ErrorKind.CLIENT_DISCONNECT:
        return
    if ex.status is None or ex.status >= 500 or ex.error in _UPSTREAM_FAILURES:
        pool.failed(up)
    else:
        pool.succeeded(up)


def _wire(line: str) -> bytes:
    """One head line: latin-1 (bytes as they came) when it can be, else UTF-8 (configured text)."""
    try:
        return line.encode("latin-1")
    except UnicodeEncodeError:
        return line.encode("utf-8")


async def _exchange(
    gw: Forwarding, front: Client, ex: Exchange, flight: Flight, up: Upstream
) -> Response | None:
    """The request to `up` (on the connection it left on, else a new one) and the answer's head."""
    tls = gw.ssl[up.lane] if up.tls else None
    for _attempt in range(3):
        conn, flight.sent = flight.sent, None
        if conn is None:
            ex.leg = leg = LegTimes(start=perf_counter())
            conn = await gw.upstream.connect(up.host, up.port, tls, leg)
            _send(conn, flight.raw, leg)
        leg = ex.leg
        try:
            head = await conn.head(gw.cfg.read_timeout_s)
            check_head(head)
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
            _client_gone(ex, conn)
            raise
        leg.headers = perf_counter()
        return await _respond(gw, front, ex, conn, head, flight.request.strip_usage)
    return _fail(ex, ErrorKind.TRUNCATED, f"upstream {up.name} kept closing its connections")


async def _respond(
    gw: Forwarding, front: Client, ex: Exchange, conn: UpstreamConn, head: ResponseHead, strip_usage: bool
) -> Response | None:
    """The answer streamed to the client through the tap; an error frame if it breaks on the way."""
    ex.status, ex.error = head.status, error_kind_for_status(head.status)
    ex.request_id = head.get(REQUEST_ID)
    ctype = (head.get("content-type") or "").split(";", 1)[0].strip().lower()
    if head.status >= 400 and ctype != "application/json":
        return await _wrap_error(gw, ex, conn, head)
    sse = ctype == "text/event-stream"
    length = head.length if head.framing == "length" and not (sse and strip_usage) else None
    tap = ex.tap = gw.tap_class(ex.api, sse=sse, strip_usage=strip_usage)
    front.start(head.status, head.reason, client_headers(head, ex.lane_headers()), length)
    sink = _Downstream(front, tap, conn)
    try:
        conn.attach(sink)
        await _await_body_end(gw, conn, sink, front)
        front.finish(tap.flush())
        gw.upstream.release(conn)
    except asyncio.CancelledError:  # the client went away (its connection cancelled the handler)
        _client_gone(ex, conn)
        raise
    except ConnectionResetError:  # the client went away while we wrote
        _client_gone(ex, conn)
    except (UpstreamGone, HttpError, TimeoutError) as exc:
        conn.abort()
        ex.error = _timeout_kind(tap) if isinstance(exc, TimeoutError) else error_kind_of(exc)
        reason = str(exc) or "upstream stalled"
        ex.error_message = clean(f"upstream: {reason}")
        _end_broken(front, sink if sse else None, ex.error, reason)
        return None
    if ex.error is None:
        ex.error = _verdict(tap, sse)
    return None


def _client_gone(ex: Exchange, conn: UpstreamConn) -> None:
    """The client went away: drop the upstream connection (no one reads the rest); the record says so."""
    conn.abort()
    ex.error = ErrorKind.CLIENT_DISCONNECT


async def _await_body_end(gw: Forwarding, conn: UpstreamConn, sink: _Downstream, front: Client) -> None:
    """Wait while the body flows through `sink` (in upstream's read callbacks): for its end, a drain,
    or a stall. ConnectionResetError when the client went away."""
    timeout = gw.cfg.read_timeout_s
    while not conn.done:
        reads = conn.reads
        try:
            await conn.wait_end(timeout)
        except UpstreamGone:
            if sink.gone or front.closed:
                raise ConnectionResetError("client went away") from None
            raise
        if sink.gone or front.closed:
            raise ConnectionResetError("client went away")
        if sink.paused:
            await front.drain()
            if front.closed:
                raise ConnectionResetError("client went away")
            sink.paused = False
            conn.resume()
        elif not conn.done and conn.reads == reads:
            raise TimeoutError(f"upstream sent nothing for {timeout} s")


async def _wrap_error(gw: Forwarding, ex: Exchange, conn: UpstreamConn, head: ResponseHead) -> Response:
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
    ex.error_message = error_detail(text) if text else clean(message)
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


def _end_broken(front: Client, sink: _Downstream | None, kind: ErrorKind, reason: str) -> None:
    """A stream that broke after its head went out: an error frame (SSE), then the end."""
    frame = b""
    if sink is not None and not sink.gone:
        frame = sse_error_event(status_for(kind), f"upstream: {reason[:200]}")
    front.finish(frame)


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


def _fail(ex: Exchange, kind: ErrorKind, message: str, conn: UpstreamConn | None = None) -> Response:
    if conn is not None:
        conn.abort()
    status = status_for(kind)
    ex.status, ex.error = status, kind
    ex.error_message = clean(message)
    return error_response(status, message, headers=ex.lane_headers())
