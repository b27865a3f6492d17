"""The record ingest edge: `POST /v1/records` as an ASGI route the collector mounts.

A source in another process (the gateway's tap) posts batches in record_batch.py's form.
The body is read bounded; with a token configured the sender must present it as a bearer
token (compared in constant time). A body that is not a batch is answered 400 and nothing of
it is taken. Otherwise each record stands alone: the good ones reach `receive`, and the
answer is 200 `{"accepted": n, "refused": [{"index", "field", "reason"}, ...], "refused_count": m,
"duplicates": d}` (the list names the first MAX_REFUSED_LISTED refused records; the count is all of
them; `refused_sink(m)` counts them on /metrics). A record no real request could be
(collector/record/plausible.py, its start judged against the body's arrival) is refused alike.
A record whose `record_id` was taken lately (the last `recent_ids` ids) is a batch sent again:
it counts as accepted, one of the `duplicates`, and does not reach `receive` a second time.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request, Response

from lanewatch.collector.common.bearer import bearer_ok
from lanewatch.collector.common.bodies import read_limited
from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.record.batch import BatchError, ParsedBatch, parse_batch
from lanewatch.collector.record.recent_ids import RecentIds
from lanewatch.collector.record.timing import RequestTiming

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


def authorized(header: str | None, token: str | None) -> bool:
    """True when no token is configured or `header` is `Bearer <token>` (constant-time compare)."""
    return token is None or bearer_ok(header, token)


def fresh_records(batch: ParsedBatch, recent: RecentIds) -> list[RequestTiming]:
    """The batch's good records not taken before (by record_id), each id remembered now."""
    out = []
    for i, record in enumerate(batch.records):
        rid = batch.ids.get(i)
        if rid is not None:
            if rid in recent:
                continue
            recent.add(rid)
        out.append(record)
    return out


def records_endpoint(
    max_body_bytes: int,
    max_records: int,
    token: str | None,
    receive: RecordsSink,
    recent_ids: int = 0,
    refused_sink: RefusedSink | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> Callable[[Request], Awaitable[Response]]:
    """The POST /v1/records handler: a batch's good records go to `receive`, the refused count to
    `refused_sink`; the answer lists the refused. `wall_clock` dates each body's arrival."""
    recent = RecentIds(recent_ids)

    async def records(request: Request) -> Response:
        if not authorized(request.headers.get(AUTHORIZATION), token):
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
        fresh = fresh_records(batch, recent)
        if fresh:
            receive(fresh)
        refused = batch.refused
        if refused:
            if refused_sink is not None:
                refused_sink(len(refused))
            first = refused[0]
            log.warning(
                "refused %d of %d records (records[%d].%s: %s)",
                len(refused),
                len(refused) + len(batch.records),
                first.index,
                first.field,
                first.reason,
            )
        listed = [r.to_json() for r in refused[:MAX_REFUSED_LISTED]]
        accepted, duplicates = len(batch.records), len(batch.records) - len(fresh)
        answer = {
            "accepted": accepted,
            "refused": listed,
            "refused_count": len(refused),
            "duplicates": duplicates,
        }
        return _answer(200, answer)

    return records
