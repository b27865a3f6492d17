"""The controller's HTTP edge: `POST /alertmanager`, `GET /routers`, `GET /healthz`, `GET /metrics`.

One of a pair that does not lead keeps each valid notification in the shared store's inbox
for the leader (202), whether a leader is alive or not, so none is lost in a takeover; the
leader handles it (decisions are idempotent, so Alertmanager sending to both is harmless).

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
import time
from collections import Counter as Tally
from dataclasses import dataclass

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.common.secrets import bearer_ok
from lanewatch.collector.common.serving import read_limited

from .leadership import Leadership
from .metrics import DegradeMetrics
from .readback import reports_json
from .service import DegradeService
from .shared_store import Deposed, InboxFull
from .webhook import WebhookError, parse_notification

__all__ = ["Front", "create_app"]

log = logging.getLogger("lanewatch.degrade.server")


@dataclass
class Front:
    """What the edge serves from: the service while this controller leads; a pair's inbox while not."""

    service: DegradeService | None = None
    leadership: Leadership | None = None  # a pair's; None for a lone controller
    inbox_max: int = 10_000

    def role(self) -> str:
        """alone, leader or standby."""
        if self.leadership is None:
            return "alone"
        return "leader" if self.service is not None and self.leadership.leading else "standby"

    def leader_json(self) -> dict[str, object] | None:
        """The lease as last seen (who leads, its term, its URL), for a pair."""
        seen = self.leadership.seen if self.leadership is not None else None
        return seen.to_json() if seen is not None else None


def create_app(edge: Front, metrics: DegradeMetrics, token: str | None, max_body_bytes: int) -> FastAPI:
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
        service = edge.service
        if service is not None:
            try:
                handled = await service.handle(notification)
            except Deposed:
                service = None  # deposed since: the new leader takes it from the inbox
            except Exception:
                log.exception("could not commit a decision; nothing changed, Alertmanager will retry")
                return refuse(500, "error", "could not store the decision; retry")
        if service is None:
            return queue(body)
        metrics.notifications.labels("applied" if handled.changed else "unchanged").inc()
        outcomes = dict(Tally(handled.decision.outcomes))
        return JSONResponse({"status": "ok", "revision": handled.revision, "outcomes": outcomes})

    def queue(body: bytes) -> JSONResponse:
        if edge.leadership is None:  # a lone controller without its service: never, but say so
            return refuse(503, "error", "the controller is not serving yet; retry")
        try:
            edge.leadership.store.enqueue(body, time.time(), edge.inbox_max)
        except InboxFull as exc:
            return refuse(503, "error", f"{exc}; retry")
        except Exception:
            log.exception("could not keep a notification for the leader; Alertmanager will retry")
            return refuse(500, "error", "could not store the notification; retry")
        metrics.notifications.labels("queued").inc()
        return JSONResponse({"status": "queued", "leader": edge.leader_json()}, status_code=202)

    @app.get("/routers")
    async def routers(request: Request) -> JSONResponse:
        if token is not None and not bearer_ok(request.headers.get(AUTHORIZATION), token):
            headers = {"WWW-Authenticate": "Bearer"}
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401, headers=headers)
        service = edge.service
        if service is None:
            body = {"error": "this controller does not lead: ask the leader", "leader": edge.leader_json()}
            return JSONResponse(body, status_code=503)
        revision = service.revision
        reports = await service.read_back()
        return JSONResponse(reports_json(revision, reports))

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        service = edge.service
        body: dict[str, object] = {"status": "ok", "role": edge.role()}
        if service is not None:
            body |= {"revision": service.revision, "adapters_synced": service.synced()}
        if edge.leadership is not None:
            body["leader"] = edge.leader_json()
        return JSONResponse(body)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app
