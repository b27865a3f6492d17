"""HTTP/1.1 parsing for both sides of the gateway: request heads from clients, response heads
and body framing from upstreams. Pure.

Only what a proxy in front of OpenAI servers needs: a request or status line and headers,
1xx interim responses skipped, bodies framed by chunked transfer coding, Content-Length,
or the connection's close. The body parser hands out payload bytes as they arrive.
Requests are read strictly (no Content-Length beside Transfer-Encoding, no space before a
header's colon, no obsolete line folding): a proxy that reads a request differently from
the server behind it can be made to smuggle one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BodyParser",
    "HttpError",
    "RequestError",
    "RequestHead",
    "ResponseHead",
    "parse_head",
    "parse_request",
]

MAX_HEAD = 64 * 1024
_MAX_SIZE_LINE = 1024


class HttpError(Exception):
    """The upstream spoke something that is not HTTP/1.1."""


class RequestError(HttpError):
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


def parse_request(buf: bytes, max_head: int = MAX_HEAD) -> tuple[RequestHead | None, int]:
    """The first request head in `buf` and the bytes it took; (None, 0) while incomplete."""
    start = 0
    while buf.startswith(b"\r\n", start):  # empty lines before a request line are allowed
        start += 2
    end = buf.find(b"\r\n\r\n", start)
    if end < 0:
        if len(buf) - start > max_head:
            raise RequestError(431, f"request head larger than {max_head} bytes")
        return None, 0
    if end - start > max_head:
        raise RequestError(431, f"request head larger than {max_head} bytes")
    lines = buf[start:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1]:
        raise RequestError(400, f"bad request line {lines[0][:80]!r}")
    method, target, proto = parts
    if proto not in ("HTTP/1.1", "HTTP/1.0"):
        raise RequestError(505 if proto.startswith("HTTP/") else 400, f"unsupported protocol {proto[:20]!r}")
    headers = tuple(_header(line) for line in lines[1:])
    version = (1, 1) if proto == "HTTP/1.1" else (1, 0)
    return _request(method, target, version, headers), end + 4


def _header(line: str) -> tuple[str, str]:
    name, sep, value = line.partition(":")
    if not sep or not name or name != name.strip() or line[0] in " \t":
        raise RequestError(400, f"bad header line {line[:80]!r}")
    return name, value.strip()


def _request(
    method: str, target: str, version: tuple[int, int], headers: tuple[tuple[str, str], ...]
) -> RequestHead:
    lengths: set[str] = set()
    te, conn, expect = "", "", False
    for name, value in headers:
        key = name.lower()
        if key == "content-length":
            lengths.add(value)
        elif key == "transfer-encoding":
            te = f"{te},{value}" if te else value
        elif key == "connection":
            conn = f"{conn},{value}"
        elif key == "expect":
            expect = value.lower() == "100-continue"
    te, conn = te.lower(), conn.lower()
    keep_alive = "close" not in conn if version >= (1, 1) else "keep-alive" in conn
    if te:
        if lengths:
            raise RequestError(400, "both Content-Length and Transfer-Encoding")
        if te.strip() != "chunked":
            raise RequestError(400, f"unsupported Transfer-Encoding {te[:40]!r}")
        return RequestHead(method, target, version, headers, keep_alive, "chunked", 0, expect)
    if len(lengths) > 1 or any(not v.isdigit() for v in lengths):
        raise RequestError(400, "bad Content-Length")
    length = int(lengths.pop()) if lengths else 0
    framing: Literal["none", "length"] = "length" if length else "none"
    return RequestHead(method, target, version, headers, keep_alive, framing, length, expect)


def parse_head(buf: bytes) -> tuple[ResponseHead | None, int]:
    """The first final response head in `buf` and the bytes it took; (None, 0) while incomplete."""
    start = 0
    while True:
        end = buf.find(b"\r\n\r\n", start)
        if end < 0:
            if len(buf) - start > MAX_HEAD:
                raise HttpError("response head larger than 64 KiB")
            return None, 0
        head = _head(buf[start:end])
        start = end + 4
        if head is not None:
            return head, start


def _head(raw: bytes) -> ResponseHead | None:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
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
        if not value.isdigit():
            raise HttpError(f"bad Content-Length {value[:20]!r}")
        return ResponseHead(status, reason, headers, keep_alive, "length", int(value))
    return ResponseHead(status, reason, headers, False, "close")


class BodyParser:
    """Turns the bytes after a head into payload; `done` once the framing says the body ended."""

    __slots__ = ("_buf", "_left", "_mode", "_state", "done", "rest")

    def __init__(self, head: ResponseHead) -> None:
        self._mode = head.framing
        self._left = head.length  # bytes left of the body (length) or of this chunk (chunked)
        self._state = "size"  # chunked: size | data | crlf | trailer
        self._buf = b""
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
            end = data.find(b"\r\n", 0, _MAX_SIZE_LINE)
            if end > 0 and data.endswith(b"\r\n"):
                try:
                    size = int(data[:end], 16)
                except ValueError:
                    size = 0  # an extension or junk: the general path reads (or refuses) it
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
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if n - pos > _MAX_SIZE_LINE:
                        raise HttpError("chunk size line too long")
                    break
                line = buf[pos:end]
                pos = end + 2
                if self._state == "trailer":
                    self.done = not line  # the empty line after trailers ends the body
                else:
                    self._size(line)
        self._buf, self.rest = (b"", buf[pos:]) if self.done else (buf[pos:], b"")
        return out[0] if len(out) == 1 else b"".join(out)

    def _size(self, line: bytes) -> None:
        text = line.split(b";", 1)[0].strip()
        try:
            size = int(text, 16)
        except ValueError:
            raise HttpError(f"bad chunk size {text[:20]!r}") from None
        if size < 0:
            raise HttpError("negative chunk size")
        if size == 0:
            self._state = "trailer"
        else:
            self._left, self._state = size, "data"
