"""The one reader of an OpenAI-style `usage` object, for the prober and the gateway's tap alike.

The prober decodes every event and hands the decoded `usage` value to `parse_usage`. The tap
decodes nothing on its data path: it finds the object's bytes with a byte scan (`usage_span`,
only in an event that holds `"usage"`), keeps the last one, and `decode_usage` reads it once,
when the record is built. JSON escapes quotes inside strings, so `"usage":{` can only be a key,
never generated text. Both end in `parse_usage`, so a new usage key is one entry in
`USAGE_PATHS`, and a record field of that name takes it with no builder touched (`usage_fields`).

vLLM's usage object: `prompt_tokens`, `completion_tokens`, `total_tokens`, and
`prompt_tokens_details: {cached_tokens}` (the prompt tokens served from the prefix cache) only
when the server runs with `--enable-prompt-tokens-details` and the request hit the cache: vLLM
leaves the key out for zero cached tokens, so absent means "none reported", not "none cached".
Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "USAGE_KEYS",
    "USAGE_PATHS",
    "Usage",
    "decode_usage",
    "parse_usage",
    "usage_fields",
    "usage_in",
    "usage_span",
]

# The key a usage object follows, as vLLM writes it and as json.dumps' default separators do.
# `"usage":null` (OpenAI's placeholder on every chunk) matches neither: no object to read.
USAGE_KEYS: Final = (b'"usage":{', b'"usage": {')
# Bytes kept from the object's start: vLLM's is ~120; the window only bounds a broken one.
_WINDOW: Final = 2048


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts from a response's `usage` object; None where it did not say."""

    prompt_tokens: int | None
    completion_tokens: int | None
    cached_prompt_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens


# Each Usage field and its path inside the usage object.
USAGE_PATHS: Final[dict[str, tuple[str, ...]]] = {
    "prompt_tokens": ("prompt_tokens",),
    "completion_tokens": ("completion_tokens",),
    "cached_prompt_tokens": ("prompt_tokens_details", "cached_tokens"),
}
# The fields a record takes as they are; completion_tokens is reconciled with the counted chunks
# by each source (a record's output_tokens and tokens_from_usage).
_RECORD_FIELDS: Final = tuple(name for name in USAGE_PATHS if name != "completion_tokens")


def parse_usage(value: object) -> Usage | None:
    """The counts in a decoded `usage` value; None when it is no object (null, absent)."""
    if not isinstance(value, dict):
        return None
    return Usage(**{name: _count(_at(value, path)) for name, path in USAGE_PATHS.items()})


def usage_span(data: bytes) -> bytes | None:
    """The bytes from the last usage object's `{` on (at most _WINDOW of them), found without decoding."""
    for key in USAGE_KEYS:
        pos = data.rfind(key)
        if pos >= 0:
            start = pos + len(key) - 1
            return data[start : start + _WINDOW]
    return None


def decode_usage(span: bytes) -> Usage | None:
    """The counts in bytes that start with a usage object (`usage_span`); None when they hold none."""
    try:
        obj, _ = json.JSONDecoder().raw_decode(span.decode("utf-8", "replace"))
    except (ValueError, RecursionError):  # cut short, or nested past our stack
        return None
    return parse_usage(obj)


def usage_in(data: bytes) -> Usage | None:
    """The counts of the last usage object in raw response bytes (an event, a body)."""
    span = usage_span(data)
    return None if span is None else decode_usage(span)


def usage_fields(usage: Usage | None) -> dict[str, Any]:
    """The record fields a usage object gives (all but completion_tokens), None where it gave none."""
    if usage is None:
        return dict.fromkeys(_RECORD_FIELDS)
    return {name: getattr(usage, name) for name in _RECORD_FIELDS}


def _at(obj: dict[str, Any], path: tuple[str, ...]) -> object:
    value: object = obj
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _count(value: object) -> int | None:
    """A token count: a non-negative integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
