"""The record ingest edge: `POST /v1/records` as an ASGI route the collector mounts.

A source in another process (the gateway's tap) posts batches in record_batch.py's form. The body is
read bounded; with tokens configured the sender must present one as a bearer token (credentials.py:
401 without), and a reporter's own token may send only the record sources among its feeds (403
naming the source; nothing of the batch is taken). A body that is not a batch is answered 400 and
nothing of it is taken. Otherwise each record stands alone: the good ones reach `receive`, and the
answer is 200 `{"accepted": n, "refused": [{"index", "field", "reason"}, ...], "refused_count": m,
"duplicates": d}` (the list names the first MAX_REFUSED_LISTED refused records; the count is all of
them; `refused_sink(m)` counts them on /metrics). A record no real request could be
(collector/record/plausible.py, its start judged against the body's arrival) is refused alike. A
record whose `record_id` was taken lately (the last `recent_ids` ids) is a batch sent again: it
counts as accepted, one of the `duplicates`, and does not reach `receive` a second time.
Every record is checked before any is applied, then each is handed to `receive` on its own: one
that `receive` raises on (a fault of the collector's, not the sender's) took nothing (the request
metrics take a record whole or not at all) and is listed among the refused, field null, while the
others are taken. Only when no record of the batch could be applied is the answer 500, and then
nothing of the batch was taken, so a sender that sends it again counts nothing twice.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request, Response

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.common.serving import read_limited
from lanewatch.collector.record.batch import BatchError, ParsedBatch, Refused, parse_batch
from lanewatch.collector.record.recent_ids import RecentIds
from lanewatch.collector.record.timing import RequestTiming

from .credentials import IngestKeys, as_auth

__all__ = ["MAX_REFUSED_LISTED", "RECORDS_PATH", "records_endpoint"]

log = logging.getLogger(__name__)
RECORDS_PATH = "/v1/records"
MAX_REFUSED_LISTED = 100  # the answer stays small when a whole batch is refused

RecordsSink = Callable[[list[RequestTiming]], None]
RefusedSink = Callable[[int], None]  # how many records of one batch were refused


def _answer(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _error(status: int, message: str, **detail: Any) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return _answer(status, {"error": {"message": message, **detail}}, headers)


@dataclass(frozen=True, slots=True)
class Applied:
    """What became of a batch's good records: taken, taken before (by record_id), or failed in `receive`."""

    taken: int = 0
    duplicates: int = 0
    failed: list[Refused] = field(default_factory=list)


def apply_batch(batch: ParsedBatch, recent: RecentIds, receive: RecordsSink) -> Applied:
    """Each good record not taken before handed to `receive` alone, its id remembered once taken; one
    that `receive` raises on is `failed` (at its index in the batch) and the others still go."""
    positions = batch.positions()
    taken = duplicates = 0
    failed: list[Refused] = []
    for k, record in enumerate(batch.records):
        rid = batch.ids.get(k)
        if rid is not None and rid in recent:
            duplicates += 1
            continue
        try:
            receive([record])
        except Exception as exc:  # a fault of ours: this record alone is lost, said so, and the rest go on
            log.exception("records[%d] could not be applied", positions[k])
            why = f"not applied: the collector failed ({type(exc).__name__})"
            failed.append(Refused(positions[k], None, why))
            continue
        if rid is not None:
            recent.add(rid)
        taken += 1
    return Applied(taken, duplicates, failed)


def records_endpoint(
    max_body_bytes: int,
    max_records: int,
    token: IngestKeys,
    receive: RecordsSink,
    recent_ids: int = 0,
    refused_sink: RefusedSink | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> Callable[[Request], Awaitable[Response]]:
    """The POST /v1/records handler: a batch's good records go to `receive`, the refused count to
    `refused_sink`; the answer lists the refused. `wall_clock` dates each body's arrival."""
    recent = RecentIds(recent_ids)
    auth = as_auth(token)

    async def records(request: Request) -> Response:
        sender = auth.identify(request.headers.get(AUTHORIZATION))
        if sender is None:
            return _error(401, "missing or wrong bearer token")
        ctype = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return _error(415, f"expected Content-Type application/json, got {ctype or 'none'!r}")
        body = await read_limited(request, max_body_bytes)
        if body is None:
            return _error(413, f"body larger than {max_body_bytes} bytes")
        try:
            batch = parse_batch(body, max_records, wall_clock())
        except BatchError as exc:
            return _error(400, str(exc), field=exc.field)
        foreign = sorted({r.source for r in batch.records if not sender.may_send(r.source)})
        if foreign:  # a reporter speaking for another kind of source: nothing of the batch is taken
            why = f"{sender.label} may not send records of source {', '.join(foreign)}"
            return _error(403, why, field="source")
        applied = apply_batch(batch, recent, receive)
        if applied.failed and not (applied.taken or applied.duplicates):  # nothing taken: may be sent again
            return _error(500, f"no record of the batch could be applied ({applied.failed[0].reason})")
        refused = sorted([*batch.refused, *applied.failed], key=lambda r: r.index)
        if refused:
            if refused_sink is not None:
                refused_sink(len(refused))
            first = refused[0]
            log.warning(
                "refused %d of %d records (records[%d].%s: %s)",
                len(refused),
                len(batch.refused) + len(batch.records),
                first.index,
                first.field,
                first.reason,
            )
        listed = [r.to_json() for r in refused[:MAX_REFUSED_LISTED]]
        accepted, duplicates = applied.taken + applied.duplicates, applied.duplicates
        answer = {
            "accepted": accepted,
            "refused": listed,
            "refused_count": len(refused),
            "duplicates": duplicates,
        }
        return _answer(200, answer)

    return records
