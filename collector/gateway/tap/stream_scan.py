"""The passive tap: what one proxied response tells about latency, read off its bytes in passing.

Pure and cheap per chunk: no JSON is decoded on the data path. JSON escapes every quote
inside a string, so a byte pattern that starts with a quote (`"content":"`) can only be a
key or a whole string value, never text inside a string; `[DONE]` is anchored at the start
of a line, which text cannot reach either. Only the usage object is decoded: its bytes are found
by a byte scan and kept (the last one), and read by the prober's own usage parser (usage.py) once,
when the record asks, so usage on every chunk (`continuous_usage_stats`) costs a slice each.

Counting, following vLLM: a content event is an SSE event whose `content` (chat) or
`text` (completions) is non-empty; TTFT is the first one, ITL the gaps between them.
Events that arrive in one read are written in one write, so their gaps are 0.
An event whose data is neither a JSON object nor `[DONE]` (a frame cut short) marks the
stream bad; checking costs two byte counts per read, and a look at each event only when
some event does not end in `}` or `[DONE]`.
Tokens come from `usage`. When the client did not ask for usage the gateway asks
upstream for it (`stream_options.include_usage`) and the tap cuts that one event out of
the stream again (`strip_usage`), so the client gets what it asked for. Only then does
the tap hold back bytes, and only those of an incomplete event, which an SSE client
could not dispatch before its blank line anyway.
vLLM's per-request metrics ride on that usage event (or a non-streamed body) when it runs with
`--enable-per-request-metrics`; they are read there, only when a `"metrics":` key is present.
An error frame or error body keeps its first bytes, for the server's message on the record.
It is known by an `"error"` key or `"object":"error"`, not by the bytes `"error"` alone: those
are also a whole string value, such as a content delta that is exactly the token `error`.
"""

from __future__ import annotations

import re
from typing import Literal

from lanewatch.collector.openai_api.response_metrics import METRICS_KEY, ResponseMetrics, metrics_in
from lanewatch.collector.openai_api.usage import USAGE_KEYS, Usage, decode_usage, usage_span
from lanewatch.collector.record.itl import MAX_ITL_SAMPLES, Gaps, GapSampler

__all__ = ["StreamTap"]

Api = Literal["chat", "completions"]

_MARKERS: dict[str, tuple[bytes, bytes]] = {
    "chat": (b'"content":"', b'"content": "'),
    "completions": (b'"text":"', b'"text": "'),
}
_DONE = b"data: [DONE]"
# A key is followed by a colon, a string value never is; `"object"` followed by a colon is a key too.
_ERROR_OBJECT = re.compile(rb'"error"\s*:|"object"\s*:\s*"error"')
_MAX_EVENT = 1 << 20  # an "event" longer than this has no boundary: a broken stream
_JSON_TAIL = 1024  # bytes of a JSON body kept to find a usage object split across reads
_ERROR_BYTES = 4096  # bytes of an error frame or body kept to find the server's message in


class StreamTap:
    """Follows one upstream response: content events, usage, [DONE], error frames."""

    __slots__ = (
        "_empty",
        "_folded",
        "_marker",
        "_spaced",
        "_spaced_empty",
        "_sse",
        "_strip",
        "_tail",
        "_usage",
        "_usage_span",
        "bad_stream",
        "content_events",
        "done",
        "error_bytes",
        "first_content_at",
        "gaps",
        "last_content_at",
        "metrics",
        "stream_error",
    )

    def __init__(self, api: Api, sse: bool, strip_usage: bool = False) -> None:
        self._marker, self._spaced = _MARKERS[api]
        self._empty = self._marker + b'"'
        self._spaced_empty = self._spaced + b'"'
        self._sse = sse
        self._strip = strip_usage and sse
        self._tail = b""
        self.first_content_at: float | None = None
        self.last_content_at: float | None = None
        self.gaps: list[float] = []  # the gaps since the last fold into `_folded`
        self._folded: GapSampler | None = None  # a long stream's earlier gaps, sampled (itl.py)
        self.content_events = 0
        self.done = False
        self.stream_error = False
        self.bad_stream = False
        self._usage_span: bytes | None = None  # the last usage object's bytes, not yet decoded
        self._usage: Usage | None = None  # what the last decoded span said
        self.metrics: ResponseMetrics | None = None  # vLLM's per-request metrics, when sent
        self.error_bytes: bytes | None = None  # the first error frame (SSE) or the body's start (JSON)

    def feed(self, data: bytes) -> tuple[bytes, int]:
        """Take the next bytes from upstream; return the bytes to send on and the content events completed."""
        if not self._sse:
            self._scan_json(data)
            return data, 0
        held = len(self._tail)
        buf = self._tail + data if held else data
        if buf.endswith(b"\n\n"):
            complete, self._tail = buf, b""
        else:
            end = _boundary(buf, held)
            if end == 0 and len(buf) > _MAX_EVENT:
                self.bad_stream = True
                end = len(buf)
            complete, self._tail = buf[:end], buf[end:]
        if not complete:
            return (b"" if self._strip else data), 0
        n = self._scan(complete)
        if self._strip:
            return (self._cut_usage(complete) if b'"usage"' in complete else complete), n
        return data, n

    def flush(self) -> bytes:
        """At the end of the stream: the held bytes of an incomplete last event (strip mode only)."""
        tail, self._tail = self._tail, b""
        if tail and tail.strip():
            self._scan(tail)
        return tail if self._strip else b""

    def content_written(self, now: float, n: int) -> None:
        """Record that `n` content events reached the client at `now` (perf_counter seconds)."""
        self.content_events += n
        last = self.last_content_at
        if last is None:
            self.first_content_at = now
            n -= 1
        else:
            self.gaps.append(now - last)
            n -= 1
        if n > 0:
            self.gaps.extend([0.0] * n)
        self.last_content_at = now
        if len(self.gaps) >= MAX_ITL_SAMPLES:  # a long stream: its gaps are kept bounded
            if self._folded is None:
                self._folded = GapSampler()
            self._folded.take(self.gaps)

    def itl(self) -> Gaps:
        """The record's itl_s and itl_stats: every gap, or an even sample and exact totals (itl.py)."""
        if self._folded is None:
            return tuple(self.gaps), None
        return self._folded.result(list(self.gaps))

    @property
    def usage(self) -> Usage | None:
        """The last usage object seen, decoded on the first ask after it came (usage.py)."""
        span = self._usage_span
        if span is not None:
            self._usage_span = None
            self._usage = decode_usage(span) or self._usage  # one cut short keeps what came before
        return self._usage

    @property
    def prompt_tokens(self) -> int | None:
        """usage.prompt_tokens, when a usage object said it."""
        usage = self.usage
        return None if usage is None else usage.prompt_tokens

    @property
    def completion_tokens(self) -> int | None:
        """usage.completion_tokens, when a usage object said it."""
        usage = self.usage
        return None if usage is None else usage.completion_tokens

    @property
    def has_usage(self) -> bool:
        """True once a usage object with completion_tokens was seen."""
        return self.completion_tokens is not None

    def _scan(self, events: bytes) -> int:
        n = events.count(self._marker) - events.count(self._empty)
        if self._spaced in events:
            n += events.count(self._spaced) - events.count(self._spaced_empty)
        if b'"usage"' in events:
            self._read_usage(events)
            if METRICS_KEY in events:
                self.metrics = metrics_in(events) or self.metrics
        if b'"error"' in events:
            self._see_error_frame(events)
        if b"[DONE]" in events and _has_done(events):
            self.done = True
        if not self.bad_stream and _ends(events) != events.count(b"\n\n"):
            self.bad_stream = _has_bad_event(events)
        return n

    def _see_error_frame(self, events: bytes) -> None:
        found = _ERROR_OBJECT.search(events)
        if found is None:  # "error" as a value: a token's text, a finish reason
            return
        self.stream_error = True
        if self.error_bytes is None:
            self.error_bytes = _event_at(events, found.start())

    def _read_usage(self, data: bytes) -> None:
        span = usage_span(data)
        if span is not None:  # a later usage object says all an earlier one did (continuous stats)
            self._usage_span = span

    def _cut_usage(self, events: bytes) -> bytes:
        for marker in USAGE_KEYS:
            pos = events.find(marker)
            if pos >= 0:
                before = events.rfind(b"\n\n", 0, pos)
                start = before + 2 if before >= 0 else 0
                stop = events.find(b"\n\n", pos)
                stop = len(events) if stop < 0 else stop + 2
                return events[:start] + events[stop:]
        return events

    def _scan_json(self, data: bytes) -> None:
        window = self._tail + data
        if b'"usage"' in window:
            self._read_usage(window)
        if METRICS_KEY in window:
            self.metrics = metrics_in(window) or self.metrics
        kept = self.error_bytes
        if kept is not None and len(kept) < _ERROR_BYTES:  # an error body read on: the message may follow
            self.error_bytes = kept + data[: _ERROR_BYTES - len(kept)]
        elif b'"error"' in window and _ERROR_OBJECT.search(window):
            self.stream_error = True
            if kept is None:
                self.error_bytes = window[:_ERROR_BYTES]
        self._tail = window[-_JSON_TAIL:]


def _ends(events: bytes) -> int:
    """Blank lines that end a JSON object or [DONE]: in a well-formed stream, every event's end."""
    return events.count(b"}\n\n") + events.count(b"[DONE]\n\n")


def _has_bad_event(events: bytes) -> bool:
    """The slow path, when some event ends otherwise: is any event's data neither an object nor [DONE]?

    Comments and blank lines end that way too, and are fine. An object cut short (a broken
    frame, vLLM's JSON written partly) is not: it ends in something other than `}`.
    """
    for event in events.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = [line[5:] for line in event.split(b"\n") if line.startswith(b"data:")]
        if not lines:
            continue
        data = b"\n".join(line[1:] if line.startswith(b" ") else line for line in lines).strip()
        if data != b"[DONE]" and not (data.startswith(b"{") and data.endswith(b"}")):
            return True
    return False


def _event_at(events: bytes, pos: int) -> bytes:
    """The SSE event around byte `pos` (at most _ERROR_BYTES of it)."""
    before = events.rfind(b"\n\n", 0, pos)
    start = before + 2 if before >= 0 else 0
    stop = events.find(b"\n\n", pos)
    return events[start : stop if stop >= 0 else len(events)][:_ERROR_BYTES]


def _boundary(buf: bytes, held: int = 0) -> int:
    """Index just past the last blank line ending an event; 0 when there is none.

    The first `held` bytes are a tail already searched (it holds no blank line): only the bytes
    after it, and the two before them that a blank line could straddle, are searched again.
    """
    start = max(held - 2, 0)
    lf, crlf = buf.rfind(b"\n\n", start), buf.rfind(b"\n\r\n", start)
    return max(lf + 2 if lf >= 0 else 0, crlf + 3 if crlf >= 0 else 0)


def _has_done(events: bytes) -> bool:
    if events.startswith(_DONE):
        return True
    return b"\n" + _DONE in events
