"""The gateway's HTTP/1.1 server on bare asyncio: the client side of every request.

Why not aiohttp's server here: per request it builds a parser message, a Request, a
handler task behind its own, a StreamResponse and a writer; per streamed response it
writes the chunked end apart. Measured side by side with nginx (bench/), that was a
third of the gateway's CPU and most of the TTFT it added. Here a connection parses its
own requests (http1/message.py, strictly), runs one handler coroutine per request, and a
streamed answer goes out through `start`/`send`/`finish`: the head, each payload as it
comes (chunk-framed on HTTP/1.1), and the last payload with the end of the body in one
write. Keep-alive, pipelined requests (answered in order), `Expect: 100-continue` (asked
only once the head passed the server's `check_head`, such as the admin API's credential),
body and head limits, a request-head timeout and a cap on open connections (timed and
counted by listener.py, which accepts them), write back-pressure (`paused`, `drain`;
no further pipelined request is read while the client is not reading answers) and a
client that hangs up (its handler is cancelled) are handled here, so handlers see whole
requests. Pipelined requests are taken in a loop,
not by recursion, and bodies are buffered in a bytearray, so both cost linear time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, cast

from multidict import CIMultiDict, CIMultiDictProxy

from lanewatch.collector.http1.message import (
    MAX_HEAD,
    BadRequest,
    BodyParser,
    HttpError,
    RequestHead,
    ResponseHead,
    parse_request,
)

if TYPE_CHECKING:
    from .listener import FrontServer

__all__ = ["ErrorBody", "FrontConn", "FrontLimits", "Handler", "HeadCheck", "Request", "Response", "Route"]

log = logging.getLogger("lanewatch.gateway")
_CHUNKED_HEAD = ResponseHead(200, "", (), True, "chunked")  # frames a chunked request body
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


@dataclass(slots=True)
class Request:
    """One whole request: its line, headers and body."""

    method: str
    path: str
    target: str  # path and query, as sent
    version: tuple[int, int]
    headers: CIMultiDictProxy[str]
    body: bytes


@dataclass(slots=True)
class Response:
    """A whole (not streamed) response."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


# A handler answers at once (a Response) or with an awaitable that streams the answer (to None) or
# gives the Response; the part before its first await runs in the callback that read the request.
Handler = Callable[[Request, "FrontConn"], Response | Awaitable[Response | None]]
Route = Callable[[str, str], Handler | Response]  # (method, path) → handler, or the answer (404, 405)
# (method, path, headers) → the answer from the head alone (a missing credential), or None to read
# the body. Asked before `100 Continue` goes out, so no client is invited to send a body that would be
# refused; the handler still checks the whole request (a client need not send `Expect`).
HeadCheck = Callable[[str, str, CIMultiDictProxy[str]], Response | None]
ErrorBody = Callable[[int, str], bytes]


@dataclass(frozen=True, slots=True)
class FrontLimits:
    """What one connection may send and hold."""

    max_body: int
    max_head: int = MAX_HEAD
    keepalive_s: float = 75.0  # an idle keep-alive connection is closed after this long
    high_water: int = 256 * 1024  # client write buffer above which `paused` is set
    head_timeout_s: float = 10.0  # a request head must be complete this long after it began
    max_connections: int = 1024  # more open at once are answered 503 and closed


class FrontConn(asyncio.Protocol):
    """One client connection: parse, dispatch, answer; one request at a time, in order."""

    def __init__(self, route: Route, limits: FrontLimits, error_body: ErrorBody, server: FrontServer) -> None:
        self._route, self._limits, self._error_body, self._server = route, limits, error_body, server
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()  # appended to in place: a body in many reads costs linear time
        self._seen = 0  # bytes of _buf already scanned for the end of a head
        self._head: RequestHead | None = None  # read, body pending
        self._chunks: BodyParser | None = None
        self._body = bytearray()
        self._busy = False  # a request is being answered
        self._dispatching = False  # _dispatch_buffered is on the stack: _done must not re-enter it
        self._version = (1, 1)
        self._close_after = False
        self._chunked = False  # the streamed response in progress is chunk-framed
        self.started = False  # the response head went out
        self.closed = False
        self.paused = False
        self._drain: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.idle_since: float | None = None  # waiting for a request since (loop time); None: answering one
        self.head_since: float | None = None  # a request head began (loop time); None: none in progress

    # ---------------------------------------------------------------- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Set the write buffer's high-water mark and wait for a request."""
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=self._limits.high_water)
        if len(self._server.conns) >= self._limits.max_connections:
            self._server.refused()
            self._refuse(503, f"the gateway has {self._limits.max_connections} connections open; retry later")
            return
        self._server.conns.add(self)
        self.idle_since = self.head_since = asyncio.get_running_loop().time()

    def data_received(self, data: bytes) -> None:
        """Buffer; parse when no request is being answered (pipelined ones wait their turn)."""
        self._buf += data
        if self._busy or self.paused:
            if len(self._buf) > self._limits.max_head + self._limits.max_body and self.transport:
                self.transport.pause_reading()  # a client pipelining without reading answers
            return
        self._dispatch_buffered()

    def eof_received(self) -> bool:
        """The client stopped sending: answer what is in flight, then close."""
        self._close_after = True
        if not self._busy:
            self.close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        """The client is gone: cancel its handler; wake a writer waiting to drain."""
        self.closed = True
        self._server.conns.discard(self)
        if self._task is not None and not self._task.done():
            # Not at once: a task not yet started would be cancelled before its first line,
            # and the cleanup of what its handler began (an upstream request) would never run.
            asyncio.get_running_loop().call_soon(self._task.cancel)
        self._wake_drain()

    def pause_writing(self) -> None:
        """The client reads slower than we write."""
        self.paused = True

    def resume_writing(self) -> None:
        """The client caught up: wake a streaming writer, or read the next pipelined request."""
        self.paused = False
        self._wake_drain()
        if not self._busy and not self.closed:
            if self.transport is not None:
                self.transport.resume_reading()
            self._dispatch_buffered()

    # ---------------------------------------------------------------- streamed answers
    def start(self, status: int, reason: str, headers: list[tuple[str, str]], length: int | None) -> None:
        """Write the response head: Content-Length when known, else chunked (HTTP/1.1) or close-framed."""
        if length is not None:
            framing = f"Content-Length: {length}"
        elif self._version >= (1, 1):
            self._chunked = True
            framing = "Transfer-Encoding: chunked"
        else:
            self._close_after, framing = True, ""
        self.started = True
        self._write(self._head_bytes(status, reason, headers, framing))

    def send(self, payload: bytes) -> None:
        """Write body bytes at once (framed as one chunk when chunked)."""
        if payload:
            self._write(b"%x\r\n%b\r\n" % (len(payload), payload) if self._chunked else payload)

    def finish(self, tail: bytes = b"") -> None:
        """The last body bytes and the end of the body, in one write."""
        if self._chunked:
            self._write((b"%x\r\n%b\r\n0\r\n\r\n" % (len(tail), tail)) if tail else b"0\r\n\r\n")
        elif tail:
            self._write(tail)

    async def drain(self) -> None:
        """Wait until the client has read enough for writing to go on (or is gone)."""
        if self.paused and not self.closed:
            self._drain = asyncio.get_running_loop().create_future()
            await self._drain

    def close(self) -> None:
        """Close once what was written is sent."""
        if self.transport is not None and not self.closed:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection now."""
        if self.transport is not None:
            self.transport.abort()

    # ---------------------------------------------------------------- internals
    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed and not self.transport.is_closing():
            self.transport.write(data)

    def _wake_drain(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        self._drain = None

    def _dispatch_buffered(self) -> None:
        """Read and dispatch buffered requests in order until one is in flight (a loop, not recursion).

        Stops while the client's write buffer is above its high-water mark: a client that sends
        requests but never reads the answers then holds one answer's worth, not all of them.
        """
        if self._dispatching:
            return
        self._dispatching = True
        try:
            # A request that asked to close (or a refusal) closes the transport: nothing after it is read.
            while (
                self._buf
                and not self._busy
                and self.transport is not None
                and not self.transport.is_closing()
            ):
                if self.paused:
                    if self.transport is not None:
                        self.transport.pause_reading()
                    return
                try:
                    request = self.next_request()
                except BadRequest as exc:
                    self._refuse(exc.status, str(exc))
                    return
                except HttpError as exc:  # a broken chunked body
                    self._refuse(400, str(exc))
                    return
                if request is None:
                    return
                self._dispatch(request)
        finally:
            self._dispatching = False

    def next_request(self) -> Request | None:
        """A whole request off the buffer, or None while it is incomplete."""
        if self._head is None:
            head, used = parse_request(self._buf, self._limits.max_head, self._seen)
            if head is None:
                self._seen = len(self._buf)
                if self.head_since is None:
                    self.head_since = asyncio.get_running_loop().time()
                return None
            del self._buf[:used]
            self._seen, self.head_since = 0, None
            if head.length > self._limits.max_body:
                raise BadRequest(413, f"the request body is larger than {self._limits.max_body} bytes")
            self._head, self._version, self._close_after = head, head.version, not head.keep_alive
            if head.framing == "chunked":
                self._chunks, self._body = BodyParser(_CHUNKED_HEAD), bytearray()
            if head.expect_continue and head.framing != "none" and not self._continue(head):
                return None
        body = self._take_body(self._head)
        if body is None:
            return None
        head, self._head = self._head, None
        headers = CIMultiDictProxy(CIMultiDict(head.headers))
        return Request(head.method, head.path, head.target, head.version, headers, body)

    def _continue(self, head: RequestHead) -> bool:
        """Ask for the body (`100 Continue`) unless the head alone is refused; False when it was."""
        refusal = self._server.check_head(head.method, head.path, CIMultiDictProxy(CIMultiDict(head.headers)))
        if refusal is not None:  # the client waits to be asked for its body: it never is
            self._head = None
            self._answer_and_close(refusal)
            return False
        self._write(_CONTINUE)
        return True

    def _take_body(self, head: RequestHead) -> bytes | None:
        if head.framing == "none":
            return b""
        if head.framing == "length":
            if len(self._buf) < head.length:
                return None
            body = bytes(self._buf[: head.length])
            del self._buf[: head.length]
            return body
        assert self._chunks is not None
        self._body += self._chunks.feed(bytes(self._buf))
        self._buf.clear()
        if len(self._body) > self._limits.max_body:
            raise BadRequest(413, f"the request body is larger than {self._limits.max_body} bytes")
        if not self._chunks.done:
            return None
        self._buf, self._chunks = bytearray(self._chunks.rest), None
        return bytes(self._body)

    def _dispatch(self, request: Request) -> None:
        self._busy, self.idle_since = True, None
        route = self._route(request.method, request.path)
        try:
            answer = route if isinstance(route, Response) else route(request, self)
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            answer = self._internal_error()
        if isinstance(answer, Response):
            self._reply(answer)
            self._done()  # inside _dispatch_buffered's loop, which goes on to the next request
            return
        self._task = asyncio.get_running_loop().create_task(self._run(answer, request))
        self._server.tasks.add(self._task)
        self._task.add_done_callback(self._server.tasks.discard)

    async def _run(self, answer: Awaitable[Response | None], request: Request) -> None:
        try:
            response = await answer
        except asyncio.CancelledError:
            return  # the client went away; the handler has recorded it
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            if self.started:
                self.abort()
                return
            response = self._internal_error()
        if response is None and not self.started:
            log.error("%s %s: the handler answered nothing", request.method, request.path)
            response = self._internal_error()
        if response is not None:
            self._reply(response)
        self._done()

    def _reply(self, response: Response) -> None:
        """Write a whole response."""
        framing = f"Content-Type: {response.content_type}\r\nContent-Length: {len(response.body)}"
        self._write(self._head_bytes(response.status, "", response.headers.items(), framing) + response.body)

    def _head_bytes(
        self, status: int, reason: str, headers: Iterable[tuple[str, str]], framing: str
    ) -> bytes:
        """A response head: the status line, `headers`, the `framing` lines, `Connection: close` when
        this answer is the connection's last, and the blank line."""
        lines = [f"HTTP/1.1 {status} {reason or _reason(status)}", *(f"{k}: {v}" for k, v in headers)]
        if framing:
            lines.append(framing)
        if self._close_after:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")

    def _internal_error(self) -> Response:
        """The answer when a handler failed or answered nothing (the cause is logged, not told)."""
        return Response(500, self._error_body(500, "internal error in the gateway"))

    def head_timed_out(self) -> None:
        """The request head took too long: 408 when some of it came, else just close."""
        if self._buf:
            self._refuse(408, f"the request head was not complete within {self._limits.head_timeout_s:g} s")
        else:
            self.close()

    def _refuse(self, status: int, message: str) -> None:
        """A request that cannot be read: the error, then close (the stream's framing is lost)."""
        self._server.on_refused(status)
        self._answer_and_close(Response(status, self._error_body(status, message)))

    def _answer_and_close(self, response: Response) -> None:
        """The last answer on this connection: nothing more is read off it."""
        self._busy = self._close_after = True
        self._reply(response)
        self.close()

    def _done(self) -> None:
        """The answer is complete: close, or read the next request."""
        self._task, self._busy, self.started, self._chunked = None, False, False, False
        if self._close_after or self.closed or self._server.draining:
            self.close()
            return
        self.idle_since = asyncio.get_running_loop().time()  # also bounds how long a request may take
        if self.transport is not None and not self.paused:
            self.transport.resume_reading()
        self._dispatch_buffered()


def _reason(status: int) -> str:
    with contextlib.suppress(ValueError):
        return HTTPStatus(status).phrase
    return "Unknown"
