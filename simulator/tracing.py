"""vLLM's OTLP request spans: one `llm_request` span per finished request (vllm/tracing).

As `vllm serve --otlp-traces-endpoint URL`: over OTLP/gRPC without TLS (`grpc`, vLLM's default when
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is unset) or OTLP/HTTP protobuf (`http/protobuf`, a full
`/v1/traces` URL); tracer `vllm.llm_engine`, span kind SERVER, start = arrival, end = finish, parented on the
request's incoming W3C `traceparent`/`tracestate`, attributes `gen_ai.latency.*` (seconds),
`gen_ai.usage.*` and `gen_ai.request.*`. Spans leave through a BatchSpanProcessor that flushes
every 100 ms, so a receiver sees a span promptly. The tracer provider is this server's own, never
the global one. No prompt or response text is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, format_trace_id, get_current_span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACER_NAME = "vllm.llm_engine"
SPAN_NAME = "llm_request"
SCHEDULE_DELAY_MS = 100
PROTOCOLS = ("grpc", "http/protobuf")  # what vLLM accepts in OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
DEFAULT_PROTOCOL = "grpc"  # vLLM's when the variable is unset
_PROPAGATOR = TraceContextTextMapPropagator()


@dataclass(frozen=True)
class SpanData:
    """The timings and counts one `llm_request` span carries."""

    request_id: str
    arrival_time: float  # unix seconds
    ttft_s: float
    e2e_s: float
    queue_s: float
    prefill_s: float
    decode_s: float
    prompt_tokens: int
    output_tokens: int
    max_tokens: int | None
    temperature: float | None
    top_p: float | None


def incoming_trace_id(headers: Mapping[str, str]) -> str | None:
    """The trace id of a valid incoming `traceparent` (32 hex digits), else None."""
    ctx = _PROPAGATOR.extract(headers)
    sc = get_current_span(ctx).get_span_context()
    return format_trace_id(sc.trace_id) if sc.is_valid else None


def span_exporter(endpoint: str, protocol: str = DEFAULT_PROTOCOL) -> SpanExporter:
    """vLLM's exporter for a protocol: gRPC without TLS, or HTTP protobuf; ValueError for others."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=endpoint, insecure=True, timeout=5)
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter(endpoint=endpoint, timeout=5)
    raise ValueError(f"unsupported OTLP traces protocol {protocol!r}: use one of {', '.join(PROTOCOLS)}")


class SpanSink:
    """Exports `llm_request` spans to one endpoint over OTLP/gRPC or OTLP/HTTP (protobuf)."""

    def __init__(self, endpoint: str, service_name: str = "vllm", protocol: str = DEFAULT_PROTOCOL) -> None:
        exporter = span_exporter(endpoint, protocol)
        self._provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        self._provider.add_span_processor(
            BatchSpanProcessor(exporter, schedule_delay_millis=SCHEDULE_DELAY_MS)
        )
        self._tracer = self._provider.get_tracer(TRACER_NAME)

    def emit(self, data: SpanData, headers: Mapping[str, str]) -> str:
        """Record one finished request; returns the span's trace id (hex)."""
        start_ns = int(data.arrival_time * 1e9)
        span = self._tracer.start_span(
            SPAN_NAME,
            context=_PROPAGATOR.extract(headers),
            kind=SpanKind.SERVER,
            start_time=start_ns,
            attributes=_attributes(data),
        )
        span.end(end_time=start_ns + int(data.e2e_s * 1e9))
        return format_trace_id(span.get_span_context().trace_id)

    def shutdown(self) -> None:
        """Flush pending spans and stop the exporter."""
        self._provider.shutdown()


def _attributes(d: SpanData) -> dict[str, str | int | float]:
    attrs: dict[str, str | int | float] = {
        "gen_ai.latency.time_to_first_token": d.ttft_s,
        "gen_ai.latency.e2e": d.e2e_s,
        "gen_ai.latency.time_in_queue": d.queue_s,
        "gen_ai.latency.time_in_model_prefill": d.prefill_s,
        "gen_ai.latency.time_in_model_decode": d.decode_s,
        "gen_ai.latency.time_in_model_inference": d.prefill_s + d.decode_s,
        "gen_ai.usage.prompt_tokens": d.prompt_tokens,
        "gen_ai.usage.completion_tokens": d.output_tokens,
        "gen_ai.request.id": d.request_id,
        "gen_ai.request.n": 1,
    }
    optional = {
        "gen_ai.request.max_tokens": d.max_tokens,
        "gen_ai.request.temperature": d.temperature,
        "gen_ai.request.top_p": d.top_p,
    }
    attrs.update({k: v for k, v in optional.items() if v is not None})
    return attrs
