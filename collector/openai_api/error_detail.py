"""A failed request's reason as the server worded it: one line, at most 200 characters, no secrets.

vLLM answers a bad request with an OpenAI error object (`{"error": {"message": ...}}`; older
servers `{"object": "error", "message": ...}`), sends the same object as an SSE frame when a
stream fails, and a proxy in between may answer with plain text or FastAPI's `{"detail": ...}`.
`error_detail` finds the message in any of these; `clean` makes it safe to keep: bearer
tokens, API keys and `key=value` secrets are replaced by `[redacted]` before the text is cut,
so a cut never leaves part of a secret behind. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_CHARS = 200
REDACTED = "[redacted]"
# The span attribute that carries it. OpenTelemetry advises against its generic `error.message`
# on spans in favour of a domain-specific name; the span's status description carries it as well.
SPAN_ATTRIBUTE = "lanewatch.error.message"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # `Authorization: Bearer x`, `Bearer x`, `Basic x`: the credential after the scheme
    (re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;]+"), rf"\1 {REDACTED}"),
    # key=value / key: value for names that hold secrets (api_key, token, password, secret, ...)
    (
        re.compile(
            r"(?i)\b((?:x-)?(?:[\w-]*api[_-]?key|(?:access|auth|api|bearer|refresh|id|session|admin)?[_-]?token"
            r"|[\w-]*secret|password|passwd|authorization|credentials?))\b"
            r"(\"?\s*[:=]\s*\"?)(?!\s*(?:bearer|basic)\b)[^\s\"',;&]+"
        ),
        rf"\1\2{REDACTED}",
    ),
    # well-known key shapes: OpenAI-style sk-..., Hugging Face hf_..., GitHub tokens
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"\b(?:hf|gh[pousr])_[A-Za-z0-9]{16,}"), REDACTED),
    # a long opaque run of letters and digits (a key or token pasted into a message)
    (re.compile(r"\b(?=[A-Za-z0-9_+/=-]*\d)(?=[A-Za-z0-9_+/=-]*[A-Za-z])[A-Za-z0-9_+/=-]{32,}"), REDACTED),
)
_SPACE = re.compile(r"\s+")


def redact(text: str) -> str:
    """`text` with bearer tokens, API keys and secret-named values replaced by `[redacted]`."""
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def clean(text: str, limit: int = MAX_CHARS) -> str | None:
    """One line, secrets redacted, at most `limit` characters (an ellipsis marks a cut); None if empty."""
    line = _SPACE.sub(" ", "".join(c if c.isprintable() else " " for c in text)).strip()
    line = redact(line)
    if not line:
        return None
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def status_description(kind: str, message: str | None) -> str:
    """A failed span's status description: the error kind, then the server's message when there is one."""
    return f"{kind}: {message}" if message else kind


def message_of(obj: Any) -> str | None:
    """The message of a decoded error body: OpenAI `error.message`, vLLM's `message`, FastAPI's `detail`."""
    if not isinstance(obj, dict):
        return None
    err = obj.get("error")
    if isinstance(err, dict):
        obj = err
    elif isinstance(err, str) and err:
        return err
    for key in ("message", "detail"):
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
        if key == "detail" and isinstance(value, list | dict):
            return json.dumps(value, separators=(",", ":"))[: MAX_CHARS * 4]
    return None


def error_detail(body: bytes | str) -> str | None:
    """The clean message of an error body (JSON error object, or plain text); None when empty."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    stripped = text.strip()
    if stripped.startswith("data:"):  # an SSE error frame
        stripped = stripped[5:].strip()
    if stripped.startswith("{"):
        try:
            message = message_of(json.loads(stripped))
        except (ValueError, RecursionError):
            message = None  # cut short, or not JSON after all: keep the text as it came
        if message is not None:
            return clean(message)
    return clean(stripped)
