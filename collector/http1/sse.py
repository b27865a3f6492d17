"""A pure, incremental parser for OpenAI-style server-sent event streams.

Bytes go in as they arrive, split anywhere (mid-line, mid-UTF-8, between CR and LF);
`StreamChunk`s come out, one per complete event. Lines follow the SSE spec (CRLF, LF or
CR; `:` comments; `data:` lines joined by newlines; an empty line dispatches). Each
event's data is then read as an OpenAI chunk: `[DONE]`, an error object, or a
completion chunk that does or does not carry generated text. Undecodable data is
counted in `bad_events` and never raised. No I/O, no clock: the caller timestamps reads.
The text itself is kept only by a parser asked to (`keep_text`, for `export.record_content`).
An error frame's message is kept cleaned (one line, cut, secrets redacted: openai_api/error_detail.py), and
vLLM's per-request metrics when a chunk carries them (openai_api/response_metrics.py). The `usage` object is
read by the same parser the gateway's tap uses (usage.py).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from lanewatch.collector.openai_api.error_detail import error_detail, message_of
from lanewatch.collector.openai_api.response_metrics import ResponseMetrics, parse_metrics
from lanewatch.collector.openai_api.usage import Usage, parse_usage

# A line longer than this is dropped and counted as bad data, so a stream without
# newlines cannot grow the buffer without bound.
MAX_LINE_BYTES = 4 * 1024 * 1024
# An event's data lines together: past this the stream is broken (`failure` says why) and the
# parser reads no more of it, so an endless event costs a bounded buffer, not the process.
MAX_EVENT_BYTES = 4 * 1024 * 1024
# Delta keys whose non-empty string value means the chunk carries generated tokens.
# Reasoning models stream their thinking under these before `content`; they are tokens.
_DELTA_TEXT_KEYS = ("content", "reasoning_content", "reasoning")


class ChunkKind(enum.StrEnum):
    """What one SSE event was."""

    CONTENT = "content"  # a completion chunk carrying generated text
    META = "meta"  # a valid chunk without text: role-only, finish reason, usage-only
    DONE = "done"  # `data: [DONE]`
    ERROR = "error"  # an error object sent in the stream
    BAD = "bad"  # data that is not a JSON object


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """One parsed event; holds response text only from a parser that keeps it."""

    kind: ChunkKind
    usage: Usage | None = None
    finish_reason: str | None = None
    error: str | None = None  # the error's type or code, for ERROR
    text: str | None = None  # the first choice's content (`keep_text` only)
    message: str | None = None  # ERROR: the server's message, cleaned (openai_api/error_detail.py)
    metrics: ResponseMetrics | None = None  # vLLM's per-request metrics (the final usage chunk)


class SseParser:
    """Incremental SSE → `StreamChunk` parser; feed bytes, then `close()` at end of stream."""

    __slots__ = (
        "_buf",
        "_data",
        "_discard",
        "_event",
        "_event_bytes",
        "_keep_text",
        "_line_bad",
        "_pending_cr",
        "bad_events",
        "comments",
        "events",
        "failure",
    )

    def __init__(self, keep_text: bool = False) -> None:
        self._keep_text = keep_text  # put the generated text on each chunk (record_content)
        self._buf: bytes | bytearray = b""  # an incomplete line
        self._pending_cr = False  # last byte seen was CR: a following LF belongs to it
        self._discard = False  # inside an oversized line: drop bytes up to its end
        self._data: list[str] = []
        self._event = ""
        self._event_bytes = 0  # bytes of the current event's data lines
        self._line_bad = False  # current event saw an undecodable or oversized line
        self.failure: str | None = None  # why the stream is broken past repair; then nothing is parsed
        self.events = 0  # events dispatched
        self.bad_events = 0  # events whose data could not be understood
        self.comments = 0  # `:` lines (keep-alives)

    def feed(self, data: bytes) -> list[StreamChunk]:
        """Parse the next bytes of the stream; return the events they completed."""
        if self.failure is not None:
            return []
        if self._pending_cr:
            self._pending_cr = False
            if data.startswith(b"\n"):
                data = data[1:]
        if self._discard:
            data = self._skip_line(data)
        if self._buf and b"\n" not in data and b"\r" not in data:
            self._grow(data)  # a long line arriving in pieces: appended, not copied and split again
            return []
        buf = self._buf + data if self._buf else data
        lines = buf.splitlines(keepends=True)
        self._buf = b""
        if lines and not lines[-1].endswith((b"\n", b"\r")):
            self._buf = lines.pop()
            if len(self._buf) > MAX_LINE_BYTES:
                self._buf, self._discard, self._line_bad = b"", True, True
        out: list[StreamChunk] = []
        for raw in lines:
            self._line(raw.rstrip(b"\r\n"), out)
            if self.failure is not None:
                return out
        if lines and not self._buf and buf.endswith(b"\r"):
            self._pending_cr = True
        return out

    def close(self) -> list[StreamChunk]:
        """End of stream: per the SSE spec an event without its blank line is dropped."""
        self._buf, self._data, self._event, self._line_bad, self._discard = b"", [], "", False, False
        self._event_bytes = 0
        return []

    @property
    def pending(self) -> bool:
        """True when a partial event is buffered (the stream stopped mid-event)."""
        return bool(self._buf or self._data or self._discard)

    def _grow(self, data: bytes) -> None:
        """Add `data` to the incomplete line held; past MAX_LINE_BYTES the line is dropped."""
        if not isinstance(self._buf, bytearray):
            self._buf = bytearray(self._buf)
        self._buf += data
        if len(self._buf) > MAX_LINE_BYTES:
            self._buf, self._discard, self._line_bad = b"", True, True

    def _skip_line(self, data: bytes) -> bytes:
        """Drop the rest of an oversized line; keep what follows its end."""
        ends = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
        if not ends:
            return b""
        self._discard = False
        end = min(ends)
        if data[end : end + 2] == b"\r\n":
            return data[end + 2 :]
        if end == len(data) - 1 and data[end] == 0x0D:
            self._pending_cr = True
        return data[end + 1 :]

    def _line(self, line: bytes | bytearray, out: list[StreamChunk]) -> None:
        if not line:
            self._dispatch(out)
            return
        if line[0] == 0x3A:  # ":" comment / keep-alive
            self.comments += 1
            return
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            self._line_bad = True
            return
        name, sep, value = text.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._event_bytes += len(line)
            if self._event_bytes > MAX_EVENT_BYTES:
                self._overflow(out)
                return
            self._data.append(value)
        elif name == "event":
            self._event = value
        # `id`, `retry` and unknown fields carry nothing we need; the spec ignores them.

    def _overflow(self, out: list[StreamChunk]) -> None:
        """An event past MAX_EVENT_BYTES: drop it, count it bad, and stop reading the stream."""
        self.failure = f"an SSE event longer than {MAX_EVENT_BYTES // (1024 * 1024)} MiB"
        self._buf, self._data, self._event, self._discard = b"", [], "", False
        self._event_bytes, self._line_bad = 0, False
        self.events += 1
        self.bad_events += 1
        out.append(StreamChunk(ChunkKind.BAD, message=self.failure))

    def _dispatch(self, out: list[StreamChunk]) -> None:
        data, event, bad = self._data, self._event, self._line_bad
        self._data, self._event, self._line_bad, self._event_bytes = [], "", False, 0
        if not data:
            if bad:
                self.events += 1
                self.bad_events += 1
                out.append(StreamChunk(ChunkKind.BAD))
            return
        self.events += 1
        chunk = StreamChunk(ChunkKind.BAD) if bad else classify("\n".join(data), event, self._keep_text)
        if chunk.kind is ChunkKind.BAD:
            self.bad_events += 1
        out.append(chunk)


def classify(data: str, event: str = "", keep_text: bool = False) -> StreamChunk:
    """Read one event's data as an OpenAI stream chunk (with the first choice's text if `keep_text`)."""
    if data.strip() == "[DONE]":
        return StreamChunk(ChunkKind.DONE)
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: a server nesting deeper than our stack
        return StreamChunk(ChunkKind.BAD)
    if not isinstance(obj, dict):
        return StreamChunk(ChunkKind.BAD)
    if event == "error" or "error" in obj or obj.get("object") == "error":
        message = message_of(obj)
        return StreamChunk(
            ChunkKind.ERROR, error=_error_name(obj), message=error_detail(message) if message else None
        )
    usage = parse_usage(obj.get("usage"))
    choices = obj.get("choices")
    if choices is None and usage is None:
        return StreamChunk(ChunkKind.BAD)
    if choices is not None and not isinstance(choices, list):
        return StreamChunk(ChunkKind.BAD)
    content, finish, text = False, None, None
    for choice in choices or ():
        if not isinstance(choice, dict):
            return StreamChunk(ChunkKind.BAD)
        content = content or _has_text(choice)
        reason = choice.get("finish_reason")
        if finish is None and isinstance(reason, str):
            finish = reason
        if keep_text and text is None and choice.get("index", 0) == 0:
            text = _content(choice)
    kind = ChunkKind.CONTENT if content else ChunkKind.META
    metrics = parse_metrics(obj.get("metrics")) if "metrics" in obj else None
    return StreamChunk(kind, usage=usage, finish_reason=finish, text=text, metrics=metrics)


def _has_text(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta")
    if isinstance(delta, dict):  # chat
        return any(isinstance(v, str) and v for v in (delta.get(k) for k in _DELTA_TEXT_KEYS))
    text = choice.get("text")  # completions
    return isinstance(text, str) and bool(text)


def _content(choice: dict[str, Any]) -> str | None:
    """The answer text a choice adds: `delta.content` (chat) or `text` (completions); not reasoning."""
    delta = choice.get("delta")
    value = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return value if isinstance(value, str) else None


def _error_name(obj: dict[str, Any]) -> str:
    err = obj.get("error", obj)
    if isinstance(err, dict):
        for key in ("type", "code"):
            value = err.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
                return str(value)[:64]
    return "error"
