"""The fast guard's ingest edge: `POST /v1/progress`, a reporter's in-flight events (progress/wire.py).

Read bounded, behind the same bearer tokens as `POST /v1/records` (credentials.py): without a
known token 401; a reporter's own token that may not send progress, or a report whose
`reporter` is not its name or `<name>-...`, 403, so one reporter cannot judge another's
requests (the guard keys each request by its reporter and id). A body that is not a report
is answered 400 naming the field, and nothing of it is taken; an event that is not one is
refused alone and counted (`refused_sink`). The answer is 200 `{"accepted": n, "refused": m}`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from fastapi import Request, Response

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.common.serving import read_limited
from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.progress.wire import PROGRESS_PATH, ProgressError, parse_progress

from .credentials import IngestKeys, as_auth

__all__ = ["PROGRESS_PATH", "progress_endpoint"]

ProgressSink = Callable[[str, list[Progress]], None]


def _answer(status: int, body: dict[str, object]) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _error(status: int, message: str, **detail: str) -> Response:
    return _answer(status, {"error": {"message": message, **detail}})


def progress_endpoint(
    max_body_bytes: int, token: IngestKeys, receive: ProgressSink, refused_sink: Callable[[int], None]
) -> Callable[[Request], Awaitable[Response]]:
    """The POST /v1/progress handler: a report's good events go to `receive`, under its reporter."""
    auth = as_auth(token)

    async def handler(request: Request) -> Response:
        sender = auth.identify(request.headers.get(AUTHORIZATION))
        if sender is None:
            return _error(401, "missing or wrong bearer token")
        if not sender.may_send("progress"):
            return _error(403, f"{sender.label} may not send progress (its feeds)")
        ctype = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return _error(415, f"expected Content-Type application/json, got {ctype or 'none'!r}")
        body = await read_limited(request, max_body_bytes)
        if body is None:
            return _error(413, f"body larger than {max_body_bytes} bytes")
        try:
            report = parse_progress(body)
        except ProgressError as exc:
            return _error(400, str(exc))
        if not sender.may_report_as(report.reporter):
            why = f"{sender.label} may report only as {sender.name!r} or {sender.name}-...: nothing taken"
            return _error(403, why, field="reporter")
        if report.refused:
            refused_sink(report.refused)
        receive(report.reporter, report.events)
        return _answer(200, {"accepted": len(report.events), "refused": report.refused})

    return handler
