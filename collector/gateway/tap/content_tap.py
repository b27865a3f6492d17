"""The tap with `export.record_content` on: it also keeps the response text.

A subclass, so the plain tap's data path stays as it is when the switch is off. With it on,
each complete event is decoded as JSON (collector/http1/sse.py `classify`) for its text and finish
reason; a body that is not an event stream (`stream: false`) is kept up to MAX_JSON_BODY and
read once at its end (a larger one's text is recorded as the truncation marker alone).
"""

from __future__ import annotations

import json

from lanewatch.collector.http1.sse import classify
from lanewatch.collector.record.content import TRUNCATED_MARKER, StreamedText

from .stream_scan import Api, StreamTap

__all__ = ["MAX_JSON_BODY", "ContentTap"]

MAX_JSON_BODY = 1 << 20  # a larger non-streamed body is passed on, its text not kept


class ContentTap(StreamTap):
    """A StreamTap that also concatenates the response's text (the first choice's)."""

    __slots__ = ("_body", "content")

    def __init__(self, api: Api, sse: bool, strip_usage: bool = False) -> None:
        super().__init__(api, sse, strip_usage)
        self.content = StreamedText()
        self._body: bytearray | None = None if sse else bytearray()

    def _scan(self, events: bytes) -> int:
        n = super()._scan(events)
        for data in _event_data(events):
            chunk = classify(data, keep_text=True)
            if chunk.text:
                self.content.add(chunk.text)
            if chunk.finish_reason is not None:
                self.content.finish_reason = chunk.finish_reason
        return n

    def _scan_json(self, data: bytes) -> None:
        super()._scan_json(data)
        body = self._body
        if body is not None:
            if len(body) + len(data) > MAX_JSON_BODY:
                self._body = None
                self.content.add(TRUNCATED_MARKER)
            else:
                body += data

    def flush(self) -> bytes:
        """At the end of the stream: as StreamTap, and read a whole non-streamed body's text."""
        if self._body is not None:
            self._read_body(bytes(self._body))
            self._body = None
        return super().flush()

    def _read_body(self, body: bytes) -> None:
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):
            return
        choices = obj.get("choices") if isinstance(obj, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(first, dict):
            return
        message = first.get("message")
        text = message.get("content") if isinstance(message, dict) else first.get("text")
        if isinstance(text, str):
            self.content.add(text)
        reason = first.get("finish_reason")
        if isinstance(reason, str):
            self.content.finish_reason = reason


def _event_data(events: bytes) -> list[str]:
    """The data of each complete SSE event in `events` (data lines joined, as the SSE spec says)."""
    out = []
    for event in events.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = [line[5:] for line in event.split(b"\n") if line.startswith(b"data:")]
        if lines:
            data = b"\n".join(line[1:] if line.startswith(b" ") else line for line in lines)
            out.append(data.decode("utf-8", "replace"))
    return out
