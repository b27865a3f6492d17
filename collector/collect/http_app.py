"""The collector's HTTP face: its metrics, its health, and each ingest path its config turns on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST

from lanewatch.collector.collect.otlp_http import TRACES_PATH, logs_endpoint, traces_endpoint
from lanewatch.collector.collect.otlp_logs import LOGS_PATH
from lanewatch.collector.collect.progress_http import PROGRESS_PATH, progress_endpoint
from lanewatch.collector.collect.records_http import RECORDS_PATH, records_endpoint

if TYPE_CHECKING:
    from lanewatch.collector.collect.service import CollectorService

__all__ = ["build_app"]


def build_app(service: CollectorService) -> FastAPI:
    """The collector's FastAPI app: GET /metrics, GET /healthz, and the ingest paths its config turns
    on (POST /v1/traces, /v1/logs, /v1/records, /v1/progress)."""
    app = FastAPI(title="lanewatch collector", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(await service.render_metrics_async(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return service.health()

    if service.cfg.otlp.enabled:
        otlp = service.cfg.otlp
        endpoint = traces_endpoint(
            otlp.max_body_bytes,
            service.receive_spans,
            service.ingest_auth,
            otlp.max_spans_per_request,
            service.count_refused,
        )
        app.add_api_route(TRACES_PATH, endpoint, methods=["POST"])
    if service.cfg.otlp.enabled and service.cfg.otlp.logs:
        otlp = service.cfg.otlp
        logs = logs_endpoint(
            otlp.max_body_bytes,
            service.receive_logs,
            service.ingest_auth,
            otlp.max_log_records_per_request,
            otlp.envoy_default_class,
        )
        app.add_api_route(LOGS_PATH, logs, methods=["POST"])
    ing = service.cfg.ingest
    if ing.enabled:
        ingest = records_endpoint(
            ing.max_body_bytes,
            ing.max_records,
            service.ingest_auth,
            service.receive_records,
            ing.recent_record_ids,
            service.count_refused_records,
        )
        app.add_api_route(RECORDS_PATH, ingest, methods=["POST"])
        if service.guard is not None:
            progress = progress_endpoint(
                ing.max_body_bytes,
                service.ingest_auth,
                service.receive_progress,
                service.count_refused_progress,
            )
            app.add_api_route(PROGRESS_PATH, progress, methods=["POST"])

    return app
