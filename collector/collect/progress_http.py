"""The fast guard's ingest edge: `POST /v1/progress`, a reporter's in-flight events (common/progress_wire.py).

Read bounded, behind the same bearer token as `POST /v1/records`. A body that is not a report
is answered 400 naming the field, and nothing of it is taken; an event that is not one is
refused alone and counted (`refused_sink`). The answer is 200 `{"accepted": n, "refused": m}`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from fastapi import Request, Response

from lanewatch.collector.common.bodies import read_limited
from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.common.inflight import Progress
from lanewatch.collector.common.progress_wire import PROGRESS_PATH, ProgressError, parse_progress

from .records_http import authorized

__all__ = ["PROGRESS_PATH", "progress_endpoint"]

ProgressSink = Callable[[str, list[Progress]], None]


def _answer(status: int, body: dict[str, object]) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def progress_endpoint(
    max_body_bytes: int, token: str | None, receive: ProgressSink, refused_sink: Callable[[int], None]
) -> Callable[[Request], Awaitable[Response]]:
    """The POST /v1/progress handler: a report's good events go to `receive`."""

    async def handler(request: Request) -> Response:
        if not authorized(request.headers.get(AUTHORIZATION), token):
            return _answer(401, {"error": {"message": "missing or wrong bearer token"}})
        ctype = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return _answer(
                415,
                {"error": {"message": f"expected Content-Type application/json, got {ctype or 'none'!r}"}},
            )
        body = await read_limited(request, max_body_bytes)
        if body is None:
            return _answer(413, {"error": {"message": f"body larger than {max_body_bytes} bytes"}})
        try:
            report = parse_progress(body)
        except ProgressError as exc:
            return _answer(400, {"error": {"message": str(exc)}})
        if report.refused:
            refused_sink(report.refused)
        receive(report.reporter, report.events)
        return _answer(200, {"accepted": len(report.events), "refused": report.refused})

    return handler
