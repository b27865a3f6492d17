"""HTTP/1.1 response parsing for the upstream leg: the head, then the body's framing. Pure.

Only what a proxy in front of OpenAI servers needs: a status line and headers, 1xx
interim responses skipped, bodies framed by chunked transfer coding, Content-Length,
or the connection's close. The body parser hands out payload bytes as they arrive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["BodyParser", "HttpError", "ResponseHead", "parse_head"]

MAX_HEAD = 64 * 1024
_MAX_SIZE_LINE = 1024


class HttpError(Exception):
    """The upstream spoke something that is not HTTP/1.1."""


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

    __slots__ = ("_buf", "_left", "_mode", "_state", "done")

    def __init__(self, head: ResponseHead) -> None:
        self._mode = head.framing
        self._left = head.length  # bytes left of the body (length) or of this chunk (chunked)
        self._state = "size"  # chunked: size | data | crlf | trailer
        self._buf = b""
        self.done = head.framing == "none" or (head.framing == "length" and head.length == 0)

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
        self._buf = buf[pos:] if not self.done else b""
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
