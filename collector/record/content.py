"""Prompt and response text for records and spans, when the user turns `export.record_content` on.

Nothing here runs with the switch off (the default). Each text is cut to MAX_CONTENT_BYTES of
UTF-8, on a character boundary, ending in TRUNCATED_MARKER when cut. On spans the text goes into
the OpenTelemetry GenAI opt-in attributes `gen_ai.input.messages` and `gen_ai.output.messages`,
as JSON strings (the Python SDK takes no structured values on span attributes) that follow their
schemas: semantic-conventions docs/gen-ai/gen-ai-spans.md ("Recording content on attributes"),
docs/gen-ai/gen-ai-input-messages.json and docs/gen-ai/gen-ai-output-messages.json
(https://github.com/open-telemetry/semantic-conventions/tree/main/docs/gen-ai).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lanewatch.collector.record.timing import Api

__all__ = [
    "INPUT_MESSAGES",
    "MAX_CONTENT_BYTES",
    "OUTPUT_MESSAGES",
    "TRUNCATED_MARKER",
    "Message",
    "StreamedText",
    "input_messages",
    "output_messages",
    "prompt_text",
    "request_messages",
    "truncate",
]

MAX_CONTENT_BYTES = 16 * 1024  # per text: a record holds at most this much prompt and as much response
TRUNCATED_MARKER = "…[truncated]"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"

Message = tuple[str, str]  # (role, text) of one prompt message

_MARKER_BYTES = len(TRUNCATED_MARKER.encode("utf-8"))


def truncate(text: str, limit: int = MAX_CONTENT_BYTES) -> str:
    """`text` when it fits in `limit` UTF-8 bytes, else its longest prefix that fits with the marker."""
    return _cut(text, limit)[0]


def _cut(text: str, limit: int) -> tuple[str, bool]:
    # No more than limit + 1 characters are encoded: a character is at least one byte.
    # "replace" turns a lone surrogate (JSON lets clients send one) into "?", so every
    # text kept encodes as UTF-8 on its way to a file or an OTLP exporter.
    data = text[: limit + 1].encode("utf-8", "replace")
    if len(text) <= limit and len(data) <= limit:
        return data.decode("utf-8"), False
    room = max(limit - _MARKER_BYTES, 0)
    return data[:room].decode("utf-8", "ignore") + TRUNCATED_MARKER, True


def request_messages(body: Mapping[str, Any], api: Api) -> list[Message]:
    """The prompt of an OpenAI request body as (role, text) pairs in order; non-text parts left out."""
    if api == "completions":
        prompt = body.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt if isinstance(prompt, list) else []
        return [("user", p) for p in prompts if isinstance(p, str)]
    out: list[Message] = []
    for message in body.get("messages") or ():
        if isinstance(message, dict):
            role = message.get("role")
            out.append((role if isinstance(role, str) else "user", _message_text(message.get("content"))))
    return out


def _message_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = (p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "".join(t for t in texts if isinstance(t, str))


def prompt_text(messages: Sequence[Message]) -> str:
    """The record's prompt: every message's text, in order, one per line, truncated."""
    return truncate("\n".join(text for _, text in messages))


def input_messages(messages: Sequence[Message], limit: int = MAX_CONTENT_BYTES) -> str:
    """`gen_ai.input.messages`: the messages as text parts, their texts cut to about `limit` bytes in all."""
    out: list[dict[str, Any]] = []
    left = limit
    for role, text in messages:
        kept, cut = _cut(text, max(left, _MARKER_BYTES))
        out.append({"role": role, "parts": [{"type": "text", "content": kept}]})
        if cut:
            break  # the marker says the rest is missing
        left -= len(kept.encode("utf-8"))
    return json.dumps(out, ensure_ascii=False)


def output_messages(text: str, finish_reason: str | None) -> str:
    """`gen_ai.output.messages`: the first choice as one assistant message (finish reason `error` if none)."""
    message = {
        "role": "assistant",
        "parts": [{"type": "text", "content": text}],
        "finish_reason": finish_reason or "error",
    }
    return json.dumps([message], ensure_ascii=False)


class StreamedText:
    """Concatenates a response's streamed text, holding little more than a record keeps."""

    __slots__ = ("_chars", "_parts", "finish_reason")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._chars = 0
        self.finish_reason: str | None = None

    def add(self, text: str) -> None:
        """Append one chunk's text; once more than a record keeps is held, the rest is dropped."""
        # More characters than MAX_CONTENT_BYTES are more bytes too: truncation is certain.
        if self._chars <= MAX_CONTENT_BYTES:
            self._parts.append(text)
            self._chars += len(text)

    def text(self) -> str:
        """The text so far, truncated."""
        return truncate("".join(self._parts))
