"""A `RequestTiming`'s JSON both ways, the records.jsonl line and the batch item: in C, through msgspec.

`encode_record_json` writes `RequestTiming.to_json()` for a tenth of what the json module costs
(mostly its float formatting): the gateway encodes every record it ships.

`decode_record` decodes a line straight into the record, checking each field's type on the way
(a string where seconds belong, an unknown error kind, a missing label), and the record's own
`__post_init__` then checks the values (collector/record/rules.py). That costs about a third of
what a generic validator costs, and builds no intermediate dict.

What msgspec's parser refuses but a record file may hold, the standard json module reads and
the record then judges: a lone surrogate escape (`"\\ud800"`, repaired to U+FFFD), and NaN,
Infinity or `1e999` (refused, naming the field, as non-finite). A whole number no int64 holds
(a token count of 10**400, a status of 2**64) is refused naming the field, as a float too large
for a float is: no reader of a record (a float counter, the report's sums) can take it. Every
refusal names the field the way a records line spells it (`itl_s.3`, `attrs.served_lane`,
`itl_stats.max_s`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

import msgspec

from lanewatch.collector.common.errors import ProtocolViolation
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import FINITE_FIELDS, RequestTiming

__all__ = ["INT64_MAX", "RecordDecodeError", "convert_record", "decode_record", "encode_record_json"]

_DECODER = msgspec.json.Decoder(RequestTiming)
_ENCODER = msgspec.json.Encoder()
# msgspec's messages end with the JSON path of the value at fault: "... - at `$.itl_s[3]`".
_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`$")
_TYPE = re.compile(r"^Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`$")
# The floats a record does not refuse itself when NaN or infinite (vLLM's response metrics).
# msgspec's parser never yields such a number; only the json module's way in can, so only it looks.
_OPEN_FLOATS = tuple(
    f.name
    for f in dataclasses.fields(RequestTiming)
    if f.type in ("float", "float | None") and f.name not in FINITE_FIELDS
)
# The whole numbers of a record: msgspec takes any Python int for them (a JSON integer past uint64
# decodes as a float and is refused as one, but json.loads gives the batch path ints of any size).
_INT_FIELDS = tuple(f.name for f in dataclasses.fields(RequestTiming) if f.type == "int | None")
INT64_MAX = 2**63 - 1
_PAST_INT64 = "a whole number no 64-bit integer holds"


class RecordDecodeError(ProtocolViolation, ValueError):
    """JSON that is no record: `field` names the part at fault (None: the whole of it)."""

    def __init__(self, field: str | None, reason: str) -> None:
        super().__init__(f"field {field!r}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


def encode_record_json(record: RequestTiming) -> bytes:
    """The record's JSON, `to_json()` compactly; ValueError when a number is NaN or infinite."""
    # The record refuses non-finite times itself; msgspec would write any other such float as null.
    if (name := _non_finite(record)) is not None:
        raise ValueError(f"field {name!r}: {getattr(record, name)} is not a finite number")
    return _ENCODER.encode(record.to_json())


def decode_record(data: bytes | str) -> RequestTiming:
    """The record a JSON object spells; RecordDecodeError says why it is not one."""
    try:
        record = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        if "Number out of range" not in str(exc):  # 1e999: the json module reads it as infinity
            raise _refusal(exc, data) from None
        why = str(exc)
    except msgspec.DecodeError as exc:  # a lone surrogate, NaN: the json module reads them
        why = str(exc).removeprefix("JSON is malformed: ")
    else:
        _check_int64(record)  # past int64 up to uint64, msgspec still decodes an int
        return record
    text = _text(data)  # outside the try below: text that is not UTF-8 says so, not "not JSON"
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        raise RecordDecodeError(None, f"not JSON ({why})") from None
    return convert_record(obj)


def convert_record(obj: Any) -> RequestTiming:
    """The record a parsed JSON value (dicts, lists, numbers, strings) spells; RecordDecodeError if none."""
    try:
        record = msgspec.convert(obj, RequestTiming)
    except msgspec.ValidationError as exc:
        raise _refusal(exc, obj) from None
    if (name := _non_finite(record)) is not None:
        raise RecordDecodeError(name, "not a finite number")
    _check_int64(record)
    return record


def _non_finite(record: RequestTiming) -> str | None:
    """The first float the record does not check itself that is NaN or infinite."""
    for name in _OPEN_FLOATS:
        value = getattr(record, name)
        if value is not None and not math.isfinite(value):
            return name
    return None


def _check_int64(record: RequestTiming) -> None:
    """RecordDecodeError naming the first whole number of the record that no int64 holds."""
    for name in _INT_FIELDS:
        value = getattr(record, name)
        if value is not None and not -INT64_MAX <= value <= INT64_MAX:
            raise RecordDecodeError(name, _PAST_INT64)
    stats = record.itl_stats
    if stats is not None and stats.count > INT64_MAX:
        raise RecordDecodeError("itl_stats.count", _PAST_INT64)


def _text(data: bytes | str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise RecordDecodeError(None, "not UTF-8 text") from None


def _refusal(exc: msgspec.ValidationError, source: Any) -> RecordDecodeError:
    """msgspec's error as the field at fault and why, in the records line's own spelling."""
    cause = exc.__cause__
    if isinstance(cause, RecordError):  # the record's own check of a value
        return RecordDecodeError(cause.field, cause.reason)
    found = _AT.match(str(exc))
    assert found is not None  # the pattern matches any text
    msg, raw = found["msg"], found["path"] or ""
    path = _field_path(raw.removesuffix("[...]"))
    if (missing := _MISSING.match(msg)) is not None:
        return RecordDecodeError(f"{path}.{missing['name']}" if path else missing["name"], "missing")
    if not path and msg.startswith("Expected `object`"):
        return RecordDecodeError(None, "expected a JSON object")
    if (typed := _TYPE.match(msg)) is not None:
        msg = f"expected {typed['want']}, got {typed['got']}"
    if raw.endswith("[...]"):  # a mapping's value: msgspec does not say under which key
        path += _bad_key(source, path)
    return RecordDecodeError(path or None, msg[:1].lower() + msg[1:])


def _field_path(path: str) -> str:
    """`.itl_s[3]` -> `itl_s.3`: how a records line's field is named everywhere else."""
    return re.sub(r"\[(\d+)\]", r".\1", path).strip(".")


def _bad_key(source: Any, path: str) -> str:
    """`.key` of the first string-to-string mapping entry under `path` whose value is not a string."""
    if isinstance(source, bytes | str):
        try:
            source = json.loads(source)
        except (ValueError, RecursionError):
            return ""
    node = source
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(value, str):
                return f".{key}"
    return ""
