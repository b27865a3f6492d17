"""HTTP/1.1 parsing for both sides of the gateway: request heads from clients, response heads
and body framing from upstreams. Pure.

Only what a proxy in front of OpenAI servers needs: a request or status line and headers,
1xx interim responses skipped, bodies framed by chunked transfer coding, Content-Length,
or the connection's close. The body parser hands out payload bytes as they arrive.
Requests are read strictly, to RFC 9110/9112's grammar: a token method, a target of visible
ASCII, header names of token characters, values without control characters (so no CR, LF
or NUL), exactly one Host on HTTP/1.1, a Content-Length of ASCII digits that never
conflicts, no Content-Length beside Transfer-Encoding, no obsolete line folding, chunk
sizes of hex digits only, and bounded chunk extensions and trailers. A proxy that reads a
request differently from the server behind it can be made to smuggle one; refusing what
the grammar does not allow leaves nothing to read differently. Heads are decoded as
latin-1, one character per byte, so what is forwarded is the bytes that came in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from lanewatch.collector.common.errors import ProtocolViolation

__all__ = [
    "BadRequest",
    "BodyParser",
    "HeadReader",
    "HttpError",
    "RequestHead",
    "ResponseHead",
    "parse_head",
    "parse_request",
]

MAX_HEAD = 64 * 1024  # a request head; a response's heads in all, interim ones included
MAX_INTERIM = 8  # interim (1xx) responses before a final one (100 Continue, 103 Early Hints)
MAX_CHUNK_LINE = 1024  # a chunk-size line with its extensions
MAX_CHUNK_EXT_TOTAL = 16 * 1024  # chunk extensions over a whole body
MAX_TRAILERS = 32  # trailer fields after the last chunk (read and dropped)
MAX_TRAILER_BYTES = 16 * 1024

Buffer = bytes | bytearray

# RFC 9110/9112 grammar. Heads are matched as latin-1 text, so each character is one byte.
_TCHAR = r"[-!#$%&'*+.^_`|~0-9A-Za-z]"
_TOKEN = re.compile(rf"{_TCHAR}+")
_REQUEST_LINE = re.compile(rf"({_TCHAR}+) ([\x21-\x7e]+) (HTTP/[0-9]\.[0-9])")
# name ":" OWS value OWS; a value is visible characters (obs-text included), spaces and tabs: no
# CTL, so no CR, LF or NUL. The possessive OWS keeps a failing match linear.
_FIELD = re.compile(rf"({_TCHAR}+):[ \t]*+([\t\x20-\x7e\x80-\xff]*)")
_FIELDS = re.compile(rf"(?:{_TCHAR}+:[\t\x20-\x7e\x80-\xff]*\r\n)*")
_BARE = re.compile(rb"\r(?!\n)|(?<!\r)\n|\x00")
_STATUS = re.compile(r"[0-9]{3}")
_DIGITS = re.compile(r"[0-9]{1,18}")  # not str.isdigit, which takes '²' and other scripts' digits
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_QUOTED = rb'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*+"'
_BTOKEN = rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+"
# chunk-size [chunk-ext]: 1*HEXDIG *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ),
# but no whitespace before a ";" (h11 and other servers refuse it there).
_CHUNK_LINE = re.compile(
    rb"([0-9A-Fa-f]{1,16})((?:;[ \t]*+"
    + _BTOKEN
    + rb"(?:[ \t]*+=[ \t]*+(?:"
    + _BTOKEN
    + rb"|"
    + _QUOTED
    + rb"))?)*+)"
)
_TRAILER = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+:[ \t]*+[\t\x20-\x7e\x80-\xff]*")


class HttpError(ProtocolViolation):
    """The upstream spoke something that is not HTTP/1.1."""


class BadRequest(HttpError):
    """A client's request the gateway cannot read; `status` is the answer (400, 413, 431, 505)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ResponseHead:
    """Status line and headers of one response."""

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    keep_alive: bool
    framing: Literal["chunked", "length", "close", "none"]
    length: int = 0

    def get(self, name: str) -> str | None:
        """The first header called `name` (any case)."""
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None


@dataclass(frozen=True, slots=True)
class RequestHead:
    """Request line and headers of one request, and how its body is framed."""

    method: str
    target: str  # as sent: path and query
    version: tuple[int, int]
    headers: tuple[tuple[str, str], ...]
    keep_alive: bool
    framing: Literal["none", "length", "chunked"]
    length: int = 0
    expect_continue: bool = False

    @property
    def path(self) -> str:
        """The target without its query."""
        return self.target.partition("?")[0]


def parse_request(buf: Buffer, max_head: int = MAX_HEAD, seen: int = 0) -> tuple[RequestHead | None, int]:
    """The first request head in `buf` and the bytes it took; (None, 0) while incomplete.

    `seen` is how much of `buf` an earlier call already looked at, so a head arriving a byte
    at a time is scanned once, not once per byte.
    """
    start = 2 if buf[:2] == b"\r\n" else 0  # one empty line before a request line is allowed
    end = buf.find(b"\r\n\r\n", max(start, seen - 3))
    if end < 0:
        if len(buf) - start > max_head:
            raise BadRequest(431, f"request head larger than {max_head} bytes")
        # A bare LF or CR, or a NUL, can never become a valid head: refuse now, not at the timeout.
        stop = len(buf) - 1 if buf[-1:] == b"\r" else len(buf)
        if _BARE.search(buf, max(start, seen - 1), stop):
            raise BadRequest(400, "bare CR or LF, or NUL, in the request head")
        return None, 0
    if end - start > max_head:
        raise BadRequest(431, f"request head larger than {max_head} bytes")
    text = buf[start : end + 2].decode("latin-1")
    eol = text.index("\r\n")
    line = _REQUEST_LINE.fullmatch(text, 0, eol)
    if line is None:
        raise BadRequest(400, f"bad request line {text[:eol][:80]!r}")
    method, target, proto = line.group(1, 2, 3)
    if proto not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(505, f"unsupported protocol {proto!r}")
    headers = _fields(text[eol + 2 :])
    version = (1, 1) if proto == "HTTP/1.1" else (1, 0)
    return _request(method, target, version, headers), end + 4


def _fields(block: str) -> tuple[tuple[str, str], ...]:
    """Header fields, each line a token, a colon and a value without controls but tab; OWS trimmed."""
    if not _FIELDS.fullmatch(block):  # one pass in C over every line; then find the bad one to name it
        raise BadRequest(400, next(_bad_field(x) for x in block.split("\r\n") if not _FIELD.fullmatch(x)))
    out = []
    for line in block.split("\r\n")[:-1]:
        name, _, value = line.partition(":")
        out.append((name, value.strip(" \t")))
    return tuple(out)


def _bad_field(line: str) -> str:
    """Why a field line was refused; names the field but never echoes its value (it may be a secret)."""
    name, sep, _value = line.partition(":")
    if not sep:
        return f"bad header line {line[:40]!r}: no colon"
    if not _TOKEN.fullmatch(name):
        return f"bad header name {name[:40]!r}"
    return f"bad header value in {name[:40]!r}: control characters are not allowed"


def _request(
    method: str, target: str, version: tuple[int, int], headers: tuple[tuple[str, str], ...]
) -> RequestHead:
    lengths: set[str] = set()
    te: list[str] = []
    conn, expect, hosts = "", False, 0
    for name, value in headers:
        key = name.lower()
        if key == "host":
            hosts += 1
        elif key == "content-length":
            lengths.update(v.strip(" \t") for v in value.split(","))
        elif key == "transfer-encoding":
            te.append(value)
        elif key == "connection":
            conn = f"{conn},{value}"
        elif key == "expect":
            expect = value.lower() == "100-continue"
    if hosts > 1 or (hosts == 0 and version >= (1, 1)):
        raise BadRequest(400, "more than one Host header" if hosts else "HTTP/1.1 without a Host header")
    conn = conn.lower()
    keep_alive = "close" not in conn if version >= (1, 1) else "keep-alive" in conn
    if te:
        if lengths:
            raise BadRequest(400, "both Content-Length and Transfer-Encoding")
        if version < (1, 1):
            raise BadRequest(400, "Transfer-Encoding in an HTTP/1.0 request")
        if len(te) > 1 or te[0].lower() != "chunked":
            raise BadRequest(501, f"unsupported Transfer-Encoding {','.join(te)[:40]!r}")
        return RequestHead(method, target, version, headers, keep_alive, "chunked", 0, expect)
    if len(lengths) > 1:
        raise BadRequest(400, "conflicting Content-Length values")
    length = 0
    if lengths:
        value = lengths.pop()
        if not _DIGITS.fullmatch(value):
            raise BadRequest(400, f"bad Content-Length {value[:20]!r}: ASCII digits only, at most 18")
        length = int(value)
    framing: Literal["none", "length"] = "length" if length else "none"
    return RequestHead(method, target, version, headers, keep_alive, framing, length, expect)


def parse_head(buf: Buffer) -> tuple[ResponseHead | None, int]:
    """The first final response head in `buf` and the bytes it took; (None, 0) while incomplete."""
    found = HeadReader().feed(bytes(buf))
    return (None, 0) if found is None else (found[0], len(buf) - len(found[1]))


class HeadReader:
    """Finds the final response head in bytes fed as they arrive; each byte is scanned once.

    Interim (1xx) heads are skipped, at most MAX_INTERIM of them, and all the heads of one
    response together are held to MAX_HEAD bytes: an upstream that never finishes its head,
    or sends 1xx heads forever, is an error after a bounded read, not a growing buffer.
    """

    __slots__ = ("_buf", "_interim", "_seen", "_taken")

    def __init__(self) -> None:
        self._buf: bytearray | None = None  # bytes of a head not yet complete
        self._seen = 0  # how much of `_buf` was searched for the blank line already
        self._taken = 0  # bytes of interim heads before `_buf`
        self._interim = 0

    @property
    def started(self) -> bool:
        """Some bytes of a head arrived (an end of the connection now cuts a head short)."""
        return self._buf is not None or self._taken > 0

    def feed(self, data: bytes) -> tuple[ResponseHead, bytes] | None:
        """The final head and the bytes after it, once `data` completes it; None while incomplete."""
        buf: Buffer = data
        if self._buf is not None:
            self._buf += data
            buf = self._buf
        while True:
            end = buf.find(b"\r\n\r\n", max(self._seen - 3, 0))
            if self._taken + (len(buf) if end < 0 else end + 4) > MAX_HEAD:
                raise HttpError(f"response head larger than {MAX_HEAD // 1024} KiB, interim heads included")
            if end < 0:
                self._buf = buf if isinstance(buf, bytearray) else bytearray(buf)
                self._seen = len(buf)
                return None
            head = _head(bytes(buf[:end]))  # bytes() of bytes is the same object: no copy
            rest = bytes(buf[end + 4 :])
            self._buf, self._seen = None, 0
            if head is not None:
                return head, rest
            self._interim += 1
            if self._interim > MAX_INTERIM:
                raise HttpError(f"more than {MAX_INTERIM} interim (1xx) responses before the final one")
            self._taken += end + 4
            if not rest:
                return None
            buf = rest


def _head(raw: bytes) -> ResponseHead | None:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not _STATUS.fullmatch(parts[1]):
        raise HttpError(f"bad status line {lines[0][:80]!r}")
    status = int(parts[1])
    if 100 <= status < 200 and status != 101:
        return None  # interim (100 Continue, 103 Early Hints): the final head follows
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(f"bad header line {line[:80]!r}")
        headers.append((name, value.strip()))
    return _framed(status, parts[2] if len(parts) > 2 else "", tuple(headers), parts[0] == "HTTP/1.0")


def _framed(status: int, reason: str, headers: tuple[tuple[str, str], ...], http10: bool) -> ResponseHead:
    lowered = {k.lower(): v for k, v in headers}
    conn = lowered.get("connection", "").lower()
    keep_alive = "close" not in conn and (not http10 or "keep-alive" in conn)
    te = lowered.get("transfer-encoding", "").lower()
    if status in (204, 304):
        return ResponseHead(status, reason, headers, keep_alive, "none")
    if te:
        if te.rsplit(",", 1)[-1].strip() != "chunked":
            return ResponseHead(status, reason, headers, False, "close")
        return ResponseHead(status, reason, headers, keep_alive, "chunked")
    if "content-length" in lowered:
        value = lowered["content-length"].strip()
        if not _DIGITS.fullmatch(value):
            raise HttpError(f"bad Content-Length {value[:20]!r}")
        return ResponseHead(status, reason, headers, keep_alive, "length", int(value))
    return ResponseHead(status, reason, headers, False, "close")


class BodyParser:
    """Turns the bytes after a head into payload; `done` once the framing says the body ended."""

    __slots__ = ("_buf", "_ext", "_left", "_mode", "_state", "_trailers", "done", "rest")

    def __init__(self, head: ResponseHead) -> None:
        self._mode = head.framing
        self._left = head.length  # bytes left of the body (length) or of this chunk (chunked)
        self._state = "size"  # chunked: size | data | crlf | trailer
        self._buf = b""
        self._ext = 0  # bytes of chunk extensions (then trailers) so far
        self._trailers = 0
        self.done = head.framing == "none" or (head.framing == "length" and head.length == 0)
        self.rest = b""  # chunked: bytes that came after the body's end (a pipelined request)

    def feed(self, data: bytes) -> bytes:
        """Payload carried by `data` (b"" when it held only framing)."""
        if self._mode == "close":
            return data
        if self._mode == "length":
            take = data[: self._left]
            self._left -= len(take)
            self.done = self._left == 0
            return take
        if self._mode == "none":
            return b""
        return self._chunked(data)

    def eof(self) -> bool:
        """The connection closed: True when that was a proper end of the body."""
        if self._mode == "close":
            self.done = True
        return self.done

    def _chunked(self, data: bytes) -> bytes:
        if self._state == "size" and not self._buf:  # the common read: exactly one whole chunk
            end = data.find(b"\r\n", 0, MAX_CHUNK_LINE)
            if end > 0 and data.endswith(b"\r\n") and _HEX.fullmatch(data, 0, end):
                size = int(data[:end], 16)
                if size > 0 and len(data) == end + size + 4:
                    return data[end + 2 : end + 2 + size]
        buf = self._buf + data if self._buf else data
        self._buf = b""
        out: list[bytes] = []
        pos, n = 0, len(buf)
        while pos < n and not self.done:
            if self._state == "data":
                take = buf[pos : pos + self._left]
                out.append(take)
                pos += len(take)
                self._left -= len(take)
                if self._left == 0:
                    self._state = "crlf"
            elif self._state == "crlf":
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise HttpError("chunk not followed by CRLF")
                pos += 2
                self._state = "size"
            else:
                limit = MAX_CHUNK_LINE if self._state == "size" else MAX_TRAILER_BYTES
                end = buf.find(b"\r\n", pos, pos + limit + 2)
                if end < 0:
                    if n - pos > limit:
                        raise HttpError(f"chunk {self._state} line longer than {limit} bytes")
                    break
                line = buf[pos:end]
                pos = end + 2
                if self._state == "trailer":
                    self._trailer(line)
                else:
                    self._size(line)
        self._buf, self.rest = (b"", buf[pos:]) if self.done else (buf[pos:], b"")
        return out[0] if len(out) == 1 else b"".join(out)

    def _size(self, line: bytes) -> None:
        match = _CHUNK_LINE.fullmatch(line)
        if match is None:
            raise HttpError(f"bad chunk size line {line[:20]!r}: hex digits, then ;name=value extensions")
        self._ext += len(line) - match.end(1)
        if self._ext > MAX_CHUNK_EXT_TOTAL:
            raise HttpError(f"chunk extensions longer than {MAX_CHUNK_EXT_TOTAL} bytes in all")
        size = int(match[1], 16)
        if size == 0:
            self._state, self._ext = "trailer", 0  # from here on `_ext` counts trailer bytes
        else:
            self._left, self._state = size, "data"

    def _trailer(self, line: bytes) -> None:
        if not line:
            self.done = True  # the empty line after the trailer fields ends the body
            return
        self._trailers += 1
        self._ext += len(line)
        if self._trailers > MAX_TRAILERS or self._ext > MAX_TRAILER_BYTES:
            raise HttpError(f"more than {MAX_TRAILERS} trailer fields or {MAX_TRAILER_BYTES} bytes of them")
        if not _TRAILER.fullmatch(line):
            raise HttpError(f"bad trailer field {line.partition(b':')[0][:40]!r}")
