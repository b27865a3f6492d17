"""The record ingest edge: `POST /v1/records` as an ASGI route the collector mounts.

A source in another process (the gateway's tap) posts batches in record_batch.py's form.
The body is read bounded; with a token configured the sender must present it as a bearer
token (compared in constant time). A batch is taken whole or not at all: 400 names the
first bad record's index and field, and nothing of it reaches `receive`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request, Response

from lanewatch.collector.common.bearer import bearer_ok
from lanewatch.collector.common.bodies import read_limited
from lanewatch.collector.record.batch import BatchError, parse_batch
from lanewatch.collector.record.timing import RequestTiming

__all__ = ["RECORDS_PATH", "records_endpoint"]

RECORDS_PATH = "/v1/records"

RecordsSink = Callable[[list[RequestTiming]], None]


def _answer(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _error(status: int, message: str, **detail: Any) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return _answer(status, {"error": {"message": message, **detail}}, headers)


def authorized(header: str | None, token: str | None) -> bool:
    """True when no token is configured or `header` is `Bearer <token>` (constant-time compare)."""
    return token is None or bearer_ok(header, token)


def records_endpoint(
    max_body_bytes: int, max_records: int, token: str | None, receive: RecordsSink
) -> Callable[[Request], Awaitable[Response]]:
    """The POST /v1/records handler: a valid batch goes to `receive` whole; 200 `{"accepted": n}`."""

    async def records(request: Request) -> Response:
        if not authorized(request.headers.get("authorization"), token):
            return _error(401, "missing or wrong bearer token")
        ctype = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return _error(415, f"expected Content-Type application/json, got {ctype or 'none'!r}")
        body = await read_limited(request, max_body_bytes)
        if body is None:
            return _error(413, f"body larger than {max_body_bytes} bytes")
        try:
            batch = parse_batch(body, max_records)
        except BatchError as exc:
            return _error(400, str(exc), index=exc.index, field=exc.field)
        receive(batch)
        return _answer(200, {"accepted": len(batch)})

    return records
