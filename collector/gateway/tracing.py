"""The gateway's server span per request and W3C trace context towards the upstream.

The tracer provider is the gateway's own (never the global one). Spans are always
sampled so the `traceparent` sent upstream asks vLLM to record its `llm_request` span,
which the collector joins by trace id; they are exported only with an OTLP endpoint.
No prompt or response text is ever put on a span.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from opentelemetry import trace
from opentelemetry.propagators.textmap import DefaultGetter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

__all__ = ["GatewayTracing"]

_GETTER: DefaultGetter = DefaultGetter()


class GatewayTracing:
    """Starts server spans and writes trace context into upstream headers."""

    def __init__(self, otlp_endpoint: str | None = None, service_name: str = "lanewatch-gateway") -> None:
        self._provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        if otlp_endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=otlp_endpoint)
            self._provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
        self._tracer = self._provider.get_tracer("lanewatch.gateway")
        self._propagator = TraceContextTextMapPropagator()

    def start(self, name: str, headers: Mapping[str, str], attributes: Mapping[str, AttributeValue]) -> Span:
        """A server span, child of the request's `traceparent` when it has one."""
        parent = self._propagator.extract(headers, getter=_GETTER)
        return self._tracer.start_span(name, context=parent, kind=SpanKind.SERVER, attributes=attributes)

    def inject(self, span: Span, carrier: MutableMapping[str, str]) -> None:
        """Write `traceparent` (and `tracestate`) for `span` into upstream request headers."""
        self._propagator.inject(carrier, context=trace.set_span_in_context(span))

    @staticmethod
    def trace_id(span: Span) -> str:
        """The span's trace id as 32 lowercase hex digits."""
        return format(span.get_span_context().trace_id, "032x")

    def shutdown(self) -> None:
        """Flush and stop the exporter."""
        self._provider.shutdown()
