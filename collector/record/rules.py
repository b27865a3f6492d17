"""What a request record may hold, so that every reader (metrics, the records file, the report) takes it.

Text is repaired, never refused: lone UTF-16 surrogates (a JSON `"\\ud800"` escape decodes to
one, and no UTF-8 encoder takes it) become U+FFFD, and each string is cut to its field's
length. Label fields (target, lane, request class, model) keep MAX_LABEL_CHARS, so one
client cannot grow a /metrics page or the process by sending a huge model name.
Numbers are checked, never repaired: a duration that is NaN, infinite or negative has no
honest value to put in its place, so the record is refused with `RecordError` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from lanewatch.collector.common.errors import ProtocolViolation

__all__ = [
    "MAX_ATTRS",
    "MAX_ATTR_CHARS",
    "MAX_CONTENT_CHARS",
    "MAX_ID_CHARS",
    "MAX_LABEL_CHARS",
    "RecordError",
    "bad_duration",
    "bad_durations",
    "clean_attrs",
    "clean_text",
]

MAX_LABEL_CHARS = 128  # target, lane, request_class, model: each becomes a metric label value
MAX_ID_CHARS = 128  # request_id, trace_id
MAX_ATTR_CHARS = 256  # each key and value of attrs
MAX_ATTRS = 32  # attrs entries kept (the first ones)
MAX_CONTENT_CHARS = 64 * 1024  # prompt_text, response_text (the sources cut at 16 KiB of UTF-8)

_SURROGATE = re.compile("[\ud800-\udfff]")
_INF = float("inf")


class RecordError(ProtocolViolation, ValueError):
    """A record refused: `field` holds a value no reader could use."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"field {field!r}: {reason}")
        self.field = field
        self.reason = reason


def clean_text(value: str, limit: int) -> str:
    """`value` cut to `limit` characters, with lone surrogates replaced by U+FFFD."""
    if len(value) > limit:
        value = value[:limit]
    if value.isascii():  # the common case, and a C-speed scan
        return value
    return _SURROGATE.sub("\ufffd", value)


def clean_attrs(attrs: Mapping[str, str]) -> dict[str, str] | None:
    """The attrs bounded and repaired; None when they already are (no copy on the hot path)."""
    if len(attrs) <= MAX_ATTRS and all(
        isinstance(k, str)
        and isinstance(v, str)
        and len(k) <= MAX_ATTR_CHARS
        and len(v) <= MAX_ATTR_CHARS
        and k.isascii()
        and v.isascii()
        for k, v in attrs.items()
    ):
        return None
    out: dict[str, str] = {}
    for k, v in list(attrs.items())[:MAX_ATTRS]:
        out[clean_text(str(k), MAX_ATTR_CHARS)] = clean_text(str(v), MAX_ATTR_CHARS)
    return out


def bad_duration(value: float | None) -> bool:
    """True for a duration no reader can use: NaN, infinite or negative (None is 'not measured')."""
    return value is not None and not (0.0 <= value < _INF)  # NaN fails every comparison


def bad_durations(values: Iterable[float]) -> int | None:
    """The index of the first bad duration among `values`, or None."""
    for i, value in enumerate(values):
        if not (0.0 <= value < _INF):
            return i
    return None
