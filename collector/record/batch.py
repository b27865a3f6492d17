"""The records batch wire format: `{"records": [RequestTiming.to_json(), ...]}`; pure.

A source in another process (the gateway's tap) ships its records to the collector's
`POST /v1/records` in this form. The batch itself must be one (a JSON object with a
`records` list, not more than the limit), or `parse_batch` raises `BatchError` and nothing
is taken. Each record then stands alone: a bad one is refused (`Refused`: its index, field
and reason) and the others are kept. Text is repaired rather than refused (lone surrogates,
over-long labels: collector/record/rules.py), so only a record with a wrong type or a
number no reader could use is refused, and a record no real request could be (plausible.py:
a duration past its bound, a TTFT past e2e, a token count past MAX_TOKENS, a start far from
`received_at`); a whole number too long for Python's int (over 4,300 digits) is refused with
its record, not with the body. Unknown keys are
ignored, in a record (as `RequestTiming.from_json` does; `tpot_s` is derived) and beside
`records`, so a newer sender still reaches an older collector.

A record may carry a `record_id` beside its fields (at most MAX_RECORD_ID_CHARS): a sender
that sends a batch again after no answer (the gateway's shipper) names each record the same
way both times, so the collector can acknowledge a record it already took without taking it
twice. `encode_record(..., with_id=True)` makes it from the record's own bytes, so a retry
of the same record carries the same id with nothing remembered at the sender.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lanewatch.collector.common.errors import ProtocolViolation
from lanewatch.collector.record.codec import RecordDecodeError, convert_record, encode_record_json
from lanewatch.collector.record.plausible import check_plausible
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import RequestTiming

__all__ = [
    "BatchError",
    "ParsedBatch",
    "Refused",
    "encode_batch",
    "encode_record",
    "parse_batch",
    "record_id_of",
]

RECORD_ID = "record_id"
MAX_RECORD_ID_CHARS = 64


class BatchError(ProtocolViolation, ValueError):
    """A body that is not a batch: `field` names the part at fault (None: the body itself)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(f"batch{'.' + field if field else ''}: {message}")
        self.field = field
        self.reason = message


@dataclass(frozen=True, slots=True)
class Refused:
    """One record of a batch that was not taken: its index, the field at fault and why."""

    index: int
    field: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        """As the POST /v1/records answer lists it."""
        return {"index": self.index, "field": self.field, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ParsedBatch:
    """The records of a batch that are good, in order, and the ones refused."""

    records: list[RequestTiming]
    refused: list[Refused] = field(default_factory=list)
    ids: dict[int, str] = field(default_factory=dict)  # index in `records` -> the record_id it carried

    def positions(self) -> list[int]:
        """Each good record's index in the batch as sent (`records[k]` was item `positions()[k]`)."""
        skipped = {r.index for r in self.refused}
        total = len(self.records) + len(self.refused)
        return [i for i in range(total) if i not in skipped]


def encode_record(record: RequestTiming, with_id: bool = False) -> bytes:
    """One record's JSON (ValueError when a number is NaN or infinite); `with_id`: with a `record_id`
    that is a digest of those bytes, the same for the same record every time."""
    body = encode_record_json(record)
    if not with_id:
        return body
    digest = hashlib.blake2b(body, digest_size=16).hexdigest()
    return body[:-1] + b',"' + RECORD_ID.encode() + b'":"' + digest.encode() + b'"}'


def record_id_of(item: Any) -> str | None:
    """The `record_id` a wire record carries, when it is a string short enough to remember."""
    value = item.get(RECORD_ID) if isinstance(item, dict) else None
    return value if isinstance(value, str) and 0 < len(value) <= MAX_RECORD_ID_CHARS else None


def encode_batch(encoded: Iterable[bytes]) -> bytes:
    """The batch body around records already encoded with `encode_record`."""
    return b'{"records":[' + b",".join(encoded) + b"]}"


def parse_batch(body: bytes, max_records: int | None = None, received_at: float | None = None) -> ParsedBatch:
    """Every good record of a batch body and every refused one; BatchError when it is no batch.
    `received_at` (wall clock) is when the body arrived: a start far from it is refused."""
    # The json module, not msgspec's parser: that one refuses a whole body over one "\ud800"
    # escape, which the record then repairs (and a bare NaN, which the record then refuses alone).
    try:
        doc = _loads(body)
    except RecursionError:
        raise BatchError("not JSON (nested too deeply)") from None
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise BatchError(f"not JSON ({str(exc)[:200]})") from None
    if not isinstance(doc, dict) or "records" not in doc:
        raise BatchError('expected a JSON object {"records": [...]}')
    items = doc["records"]
    if not isinstance(items, list):
        raise BatchError("expected a list", "records")
    if max_records is not None and len(items) > max_records:
        raise BatchError(f"{len(items)} records, more than the {max_records} one batch may hold")
    out = ParsedBatch([])
    for index, item in enumerate(items):
        try:
            record = convert_record(item)
            check_plausible(record, received_at)
        except (RecordDecodeError, RecordError) as exc:
            out.refused.append(Refused(index, exc.field, exc.reason))
            continue
        if (rid := record_id_of(item)) is not None:
            out.ids[len(out.records)] = rid
        out.records.append(record)
    return out


def _loads(body: bytes) -> Any:
    """The JSON value of a body; an integer too long for Python's int (json.loads refuses the whole
    body over one) read as one past every bound, so its record alone is refused, naming the field."""
    try:
        return json.loads(body)
    except ValueError:  # not JSON at all, or such an integer: only then the slower read
        return json.loads(body, parse_int=_whole_number)


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # over sys.get_int_max_str_digits() digits
        return -_PAST_EVERY_BOUND if text.startswith("-") else _PAST_EVERY_BOUND


_PAST_EVERY_BOUND = 1 << 1100  # past int64, and past any float (about 1.8e308)
