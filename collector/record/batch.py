"""The records batch wire format: `{"records": [RequestTiming.to_json(), ...]}`; pure.

A source in another process (the gateway's tap) ships its records to the collector's
`POST /v1/records` in this form. A batch is all good or rejected whole: `parse_batch`
raises `BatchError` naming the first bad record's index and field, so nothing of a bad
batch is ingested. Unknown keys are ignored, in a record (as `RequestTiming.from_json`
does; `tpot_s` is derived) and beside `records`, so a newer sender still reaches an older
collector.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, ValidationError

from lanewatch.collector.record.files import non_finite_field
from lanewatch.collector.record.timing import RequestTiming

__all__ = ["BatchError", "encode_batch", "encode_record", "parse_batch"]


class _Batch(BaseModel):
    # extra="forbid" here would reach into RequestTiming and refuse `tpot_s`.
    model_config = ConfigDict(extra="ignore")

    records: list[RequestTiming]


class BatchError(ValueError):
    """A batch that is not one: `index` is the bad record's (None: the batch itself), `field` its field."""

    def __init__(self, message: str, index: int | None = None, field: str | None = None) -> None:
        where = f"records[{index}]" if index is not None else "batch"
        if field:
            where += f".{field}"
        super().__init__(f"{where}: {message}")
        self.index = index
        self.field = field
        self.reason = message


def encode_record(record: RequestTiming) -> bytes:
    """One record's JSON (ValueError when a number is NaN or infinite)."""
    return json.dumps(record.to_json(), separators=(",", ":"), allow_nan=False).encode()


def encode_batch(encoded: Iterable[bytes]) -> bytes:
    """The batch body around records already encoded with `encode_record`."""
    return b'{"records":[' + b",".join(encoded) + b"]}"


def parse_batch(body: bytes, max_records: int | None = None) -> list[RequestTiming]:
    """Every record of a batch body, validated; BatchError names the first problem."""
    try:
        batch = _Batch.model_validate_json(body)
    except ValidationError as exc:
        raise _batch_error(exc) from None
    if max_records is not None and len(batch.records) > max_records:
        raise BatchError(f"{len(batch.records)} records, more than the {max_records} one batch may hold")
    for index, record in enumerate(batch.records):
        if bad := non_finite_field(record):
            raise BatchError("not a finite number", index, bad)
    return batch.records


def _batch_error(exc: ValidationError) -> BatchError:
    err = exc.errors()[0]
    loc = err["loc"]
    if err["type"] == "json_invalid":
        return BatchError(f"not JSON ({err['msg'].removeprefix('Invalid JSON: ')})")
    if not loc:
        return BatchError('expected a JSON object {"records": [...]}')
    if loc[0] != "records" or len(loc) < 2:
        return BatchError(err["msg"], None, ".".join(str(p) for p in loc))
    index = loc[1] if isinstance(loc[1], int) else None
    field = ".".join(str(p) for p in loc[2:]) or None
    return BatchError(err["msg"], index, field)
