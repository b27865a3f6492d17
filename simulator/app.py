"""The HTTP edge: vLLM's OpenAI API, /metrics, /health, admin faults and ground truth (FastAPI)."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import protocol, tokens
from .engine import Engine
from .faults import FaultError, FaultSpec, FaultState, parse_faults
from .lifecycle import Generation, GenerationResponse, Recorder, error_record, trace_headers
from .metrics import EngineState, VllmMetrics
from .profiles import Profile
from .runner import EngineRunner
from .specdecode import SpecDecodeConfig
from .tracing import SpanSink
from .truth import TruthStore

VLLM_VERSION = "0.33.0"
MAX_REQUEST_ID = 256
MAX_ADMIN_BODY = 64 * 1024


@dataclass
class SimConfig:
    """What one simulator serves and how."""

    profile: Profile
    model: str
    seed: int = 0
    max_num_seqs: int | None = None
    admin_token: str | None = None
    otlp_endpoint: str | None = None
    otlp_protocol: str = "grpc"  # as OTEL_EXPORTER_OTLP_TRACES_PROTOCOL for vLLM: grpc or http/protobuf
    faults: FaultSpec = field(default_factory=FaultSpec)
    api_key: str | None = None  # like `vllm serve --api-key`: required on /v1/*
    per_request_metrics: bool = False  # like `vllm serve --enable-per-request-metrics`
    spec: SpecDecodeConfig | None = None  # like `vllm serve --speculative-config`; None: off
    enable_prefix_caching: bool = True  # like `vllm serve --[no-]enable-prefix-caching`
    # like `vllm serve --enable-prompt-tokens-details`: usage.prompt_tokens_details.cached_tokens on a hit
    prompt_tokens_details: bool = False


class Simulator:
    """The engine, its runner and every record keeper for one served model."""

    def __init__(self, cfg: SimConfig, registry: CollectorRegistry | None = None) -> None:
        self.cfg = cfg
        self.registry = registry or CollectorRegistry()
        econf = dataclasses.replace(
            cfg.profile.engine_config(cfg.max_num_seqs),
            spec=cfg.spec,
            seed=cfg.seed,
            enable_prefix_caching=cfg.enable_prefix_caching,
        )
        self.engine = Engine(econf)
        self.faults = FaultState(cfg.faults, cfg.seed)
        state = EngineState(
            running=lambda: self.engine.num_running,
            waiting=lambda: self.engine.num_waiting,
            kv_usage=lambda: self.engine.kv.usage,
        )
        cache_info = {
            "block_size": str(econf.block_size),
            "cache_dtype": "auto",
            "enable_prefix_caching": str(econf.enable_prefix_caching),
            "gpu_memory_utilization": str(cfg.profile.gpu_memory_utilization),
            "num_gpu_blocks": str(econf.num_kv_blocks),
        }
        k = cfg.spec.num_speculative_tokens if cfg.spec else None
        metrics = VllmMetrics(self.registry, cfg.model, econf.max_model_len, state, cache_info, k)
        self.recorder = Recorder(
            TruthStore(), metrics, None, cfg.profile, cfg.per_request_metrics, cfg.prompt_tokens_details
        )
        self.runner = EngineRunner(self.engine, factors=self._factors, on_step=metrics.on_step)
        self.on_refuse: Callable[[float], None] = lambda _s: None
        self._ids = itertools.count()

    def _factors(self) -> tuple[float, float]:
        spec = self.faults.spec
        return spec.prefill_slowdown, spec.decode_slowdown

    def apply_faults(self, spec: FaultSpec) -> None:
        """Make `spec` the fault set; a refusal starts now."""
        self.faults.replace(spec)
        if spec.refuse_connections_s > 0:
            self.on_refuse(spec.refuse_connections_s)

    async def start(self) -> None:
        """Start the engine (and the span exporter) in the running loop."""
        if self.cfg.otlp_endpoint:
            self.recorder.spans = SpanSink(self.cfg.otlp_endpoint, protocol=self.cfg.otlp_protocol)
        self.runner.start()

    async def shutdown(self) -> None:
        """Stop the engine and flush spans."""
        await self.runner.shutdown()
        if self.recorder.spans is not None:
            self.recorder.spans.shutdown()

    def next_engine_id(self, request_id: str) -> str:
        """An engine-internal id, unique per request."""
        return f"{request_id}#{next(self._ids)}"


class RequestIdMiddleware:
    """Echo `x-request-id` (or make one) on every response; the id goes in scope["x_request_id"].

    It is also the first code a request meets, so it stamps the arrival (perf clock, unix time)
    in scope["x_arrival"]: routing and body parsing then count in the request's latency.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope["x_arrival"] = (time.perf_counter(), time.time())
        rid = ""
        for key, value in scope["headers"]:
            if key == b"x-request-id":
                rid = value.decode("latin-1").strip()
                break
        if not rid or len(rid) > MAX_REQUEST_ID:
            rid = uuid.uuid4().hex
        scope["x_request_id"] = rid
        header = (b"x-request-id", rid.encode("latin-1"))

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        await self.app(scope, receive, send_with_id)


class ApiKeyMiddleware:
    """`vllm serve --api-key`: `/v1/*` needs `Authorization: Bearer <key>`, else 401 Unauthorized.

    As vLLM does, both sides are hashed before the constant-time compare, so not even the
    key's length leaks. /health, /metrics, /version, /load and /debug stay open; /admin has
    its own token.
    """

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self._digest = hashlib.sha256(api_key.encode()).digest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1") and not self._allowed(scope):
            await JSONResponse({"error": "Unauthorized"}, status_code=401)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        value = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        return bearer_matches(value, self._digest)


def bearer_matches(header: bytes, digest: bytes) -> bool:
    """Whether an Authorization value is `Bearer <secret>` (any case of `Bearer`, RFC 9110) for the
    secret whose SHA-256 is `digest`; hashed first, so neither content nor length leaks."""
    scheme, _, given = header.partition(b" ")
    same = hmac.compare_digest(hashlib.sha256(given.strip()).digest(), digest)
    return same and scheme.lower() == b"bearer"


def error_response(err: protocol.ApiError) -> JSONResponse:
    """OpenAI error JSON with its status (429 adds Retry-After)."""
    headers = {"retry-after": "1"} if err.status == 429 else None
    return JSONResponse(err.body(), status_code=err.status, headers=headers)


def create_app(sim: Simulator) -> ASGIApp:
    """The ASGI app for one simulator."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await sim.start()
        try:
            yield
        finally:
            await sim.shutdown()

    app = FastAPI(
        title="lanewatch sim", version=VLLM_VERSION, lifespan=lifespan, docs_url=None, redoc_url=None
    )
    _generation_routes(app, sim)
    _info_routes(app, sim)
    _admin_routes(app, sim)
    guarded: ASGIApp = ApiKeyMiddleware(app, sim.cfg.api_key) if sim.cfg.api_key else app
    return RequestIdMiddleware(guarded)


def _generation_routes(app: FastAPI, sim: Simulator) -> None:
    async def generate(api: protocol.Api, request: Request) -> Response:
        arrival_s, arrival_time = request.scope["x_arrival"]
        rid: str = request.scope["x_request_id"]
        headers = trace_headers(request.headers)
        draw = sim.faults.draw()
        try:
            if draw.error_status is not None:
                raise protocol.ApiError(draw.error_status, f"Injected fault: HTTP {draw.error_status}.")
            cfg = sim.cfg
            params = protocol.parse_request(
                api, await request.body(), cfg.model, cfg.profile.max_model_len, cfg.seed
            )
            plan = tokens.plan_output(params.max_tokens, params.ignore_eos, params.digest)
            why = sim.engine.check(params.prompt_tokens, plan.tokens)
            if why:
                raise protocol.ApiError(400, f"The request cannot be served: it {why}.", param="max_tokens")
        except protocol.ApiError as err:
            sim.recorder.truth.add(error_record(rid, arrival_s, arrival_time, err.status, headers))
            return error_response(err)
        gen = Generation(params, plan, rid, sim.next_engine_id(rid), arrival_s, arrival_time, headers, draw)
        spec = sim.faults.spec
        return GenerationResponse(gen, sim.runner, sim.recorder, spec.queue_delay_s, spec.frontend_delay_s)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        """OpenAI chat completions, streamed or not."""
        return await generate("chat", request)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        """OpenAI text completions, streamed or not."""
        return await generate("completions", request)


def _info_routes(app: FastAPI, sim: Simulator) -> None:
    @app.get("/health")
    async def health() -> Response:
        """Empty 200 while the engine runs."""
        return Response(status_code=200)

    @app.get("/version")
    async def version() -> dict[str, str]:
        """The vLLM version this simulator follows."""
        return {"version": VLLM_VERSION, "simulator": "lanewatch"}

    @app.get("/load")
    async def load() -> dict[str, int]:
        """Requests in flight, as vLLM's /load."""
        return {"server_load": sim.runner.in_flight}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        """The one served model."""
        card = {
            "id": sim.cfg.model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": sim.cfg.profile.model.name,
            "parent": None,
            "max_model_len": sim.cfg.profile.max_model_len,
            "permission": [],
        }
        return {"object": "list", "data": [card]}

    @app.get("/metrics")
    async def metrics() -> Response:
        """vLLM's Prometheus metrics."""
        # text format 0.0.4, as vLLM serves it and Prometheus 2.x expects
        return Response(generate_latest(sim.registry), media_type=CONTENT_TYPE_PLAIN_0_0_4)

    @app.get("/debug/requests/{request_id}")
    async def debug_request(request_id: str) -> Response:
        """Ground truth for one of the last 10,000 requests."""
        record = sim.recorder.truth.get(request_id)
        if record is None:
            err = protocol.ApiError(404, f"No ground truth for request `{request_id}`.", param="request_id")
            return error_response(err)
        return JSONResponse(record.to_json())


def _admin_routes(app: FastAPI, sim: Simulator) -> None:
    def denied(request: Request) -> Response | None:
        token = sim.cfg.admin_token
        if token is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        given = request.headers.get("authorization", "").encode("latin-1")
        if not bearer_matches(given, hashlib.sha256(token.encode()).digest()):
            body = {
                "error": {
                    "message": "Missing or wrong bearer token.",
                    "type": "AuthenticationError",
                    "code": 401,
                }
            }
            return JSONResponse(body, status_code=401, headers={"www-authenticate": "Bearer"})
        return None

    def current() -> dict[str, Any]:
        return {"faults": sim.faults.spec.model_dump(mode="json")}

    @app.get("/admin/faults")
    async def get_faults(request: Request) -> Response:
        """The active fault set."""
        return denied(request) or JSONResponse(current())

    @app.post("/admin/faults")
    async def post_faults(request: Request) -> Response:
        """Replace the fault set (body documented in lanewatch.simulator.faults)."""
        if (resp := denied(request)) is not None:
            return resp
        try:
            spec = parse_faults(await _json(request))
        except _TooLarge:
            return error_response(protocol.ApiError(413, f"The body is larger than {MAX_ADMIN_BODY} bytes."))
        except FaultError as exc:
            return error_response(protocol.ApiError(400, f"Invalid faults: {exc}"))
        sim.apply_faults(spec)
        return JSONResponse(current())

    @app.delete("/admin/faults")
    async def delete_faults(request: Request) -> Response:
        """Clear every fault."""
        if (resp := denied(request)) is not None:
            return resp
        sim.faults.clear()
        return JSONResponse(current())


class _TooLarge(Exception):
    pass


async def _json(request: Request) -> Any:
    body = b""
    async for chunk in request.stream():  # read no further than the limit
        body += chunk
        if len(body) > MAX_ADMIN_BODY:
            raise _TooLarge
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than Python's stack
        raise FaultError(f"invalid JSON: {str(exc)[:200]}") from None
