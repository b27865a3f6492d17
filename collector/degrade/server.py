"""The controller's HTTP edge: `POST /alertmanager`, `GET /routers`, `GET /healthz`, `GET /metrics`.

`GET /routers` asks every router what it holds (each adapter's read-back) and answers it
beside the desired state (readback.py); it takes the same bearer token as `POST
/alertmanager`, since each call makes the controller call every router once.

Every refusal happens before any state is touched, in this order: the bearer token
(constant-time compare; 401), the body size (413), the content type (415), the body itself
(400 naming each bad field). Only a valid notification reaches the service, and it is
answered 2xx only once its decision is committed, so Alertmanager retries anything lost.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.common.secrets import bearer_ok
from lanewatch.collector.common.serving import read_limited

from .metrics import DegradeMetrics
from .readback import reports_json
from .service import DegradeService
from .webhook import WebhookError, parse_notification

__all__ = ["create_app"]

log = logging.getLogger("lanewatch.degrade.server")


def create_app(
    service: DegradeService, metrics: DegradeMetrics, token: str | None, max_body_bytes: int
) -> FastAPI:
    """The ASGI app; `token` None accepts unauthenticated posts (only with --insecure-dev)."""
    app = FastAPI(title="lanewatch degrade controller", docs_url=None, redoc_url=None, openapi_url=None)

    def refuse(status: int, outcome: str, error: str, **extra: object) -> JSONResponse:
        metrics.notifications.labels(outcome).inc()
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse({"error": error, **extra}, status_code=status, headers=headers)

    @app.post("/alertmanager")
    async def alertmanager(request: Request) -> Response:
        if token is not None and not bearer_ok(request.headers.get(AUTHORIZATION), token):
            return refuse(401, "unauthorized", "missing or wrong bearer token")
        body = await read_limited(request, max_body_bytes)
        if body is None:
            return refuse(413, "too_large", f"body larger than {max_body_bytes} bytes")
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            return refuse(415, "invalid", "content-type must be application/json")
        try:
            notification = parse_notification(body)
        except WebhookError as exc:
            return refuse(400, "invalid", "not an Alertmanager version 4 notification", reasons=exc.reasons)
        try:
            handled = await service.handle(notification)
        except Exception:
            log.exception("could not commit a decision; nothing changed, Alertmanager will retry")
            return refuse(500, "error", "could not store the decision; retry")
        metrics.notifications.labels("applied" if handled.changed else "unchanged").inc()
        outcomes = dict(Tally(handled.decision.outcomes))
        return JSONResponse({"status": "ok", "revision": handled.revision, "outcomes": outcomes})

    @app.get("/routers")
    async def routers(request: Request) -> JSONResponse:
        if token is not None and not bearer_ok(request.headers.get(AUTHORIZATION), token):
            headers = {"WWW-Authenticate": "Bearer"}
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401, headers=headers)
        revision = service.revision
        reports = await service.read_back()
        return JSONResponse(reports_json(revision, reports))

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        return JSONResponse(
            {"status": "ok", "revision": service.revision, "adapters_synced": service.synced()}
        )

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app
