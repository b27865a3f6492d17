"""The gateway's server span per request and W3C trace context towards the upstream.

Latency matters more than tidiness here: the `traceparent` sent upstream is made at once
from fresh ids (or the client's trace), and the SDK span with those very ids is built
only when the request has ended, with its real start time, so span bookkeeping never
sits between the client and its first token. The tracer provider is the gateway's own
(never the global one); spans are exported only with an OTLP endpoint. Spans follow the
client's sampled flag (sampled when the gateway starts the trace), so vLLM records its
`llm_request` span for the collector to join by trace id. Prompt and response text are
put on a span only with `export.record_content` on (request_path.py, collector/record/content.py).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags, TraceState
from opentelemetry.util.types import AttributeValue

from lanewatch.collector.common.headers import TRACEPARENT, TRACESTATE

__all__ = ["GatewayTracing", "TraceIds", "parse_traceparent"]

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


@dataclass(frozen=True, slots=True)
class TraceIds:
    """The ids of one request's server span and of its parent, if the client sent one."""

    trace_id: int
    span_id: int
    sampled: bool
    parent_span_id: int | None = None
    tracestate: str | None = None

    @property
    def traceparent(self) -> str:
        """The W3C `traceparent` naming the server span as the upstream request's parent."""
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{'01' if self.sampled else '00'}"

    @property
    def trace_id_hex(self) -> str:
        """The trace id as 32 lowercase hex digits."""
        return f"{self.trace_id:032x}"


def parse_traceparent(value: str | None) -> tuple[int, int, bool] | None:
    """(trace id, parent span id, sampled) from a valid W3C traceparent; None otherwise."""
    if not value:
        return None
    m = _TRACEPARENT.match(value.strip())
    if m is None or m.group(1) == "ff" or (m.group(1) == "00" and m.group(5)):
        return None
    trace_id, span_id = int(m.group(2), 16), int(m.group(3), 16)
    if trace_id == 0 or span_id == 0:
        return None
    return trace_id, span_id, bool(int(m.group(4), 16) & 1)


class _PresetIds(IdGenerator):
    """Hands the SDK the ids already sent upstream (set right before each start_span)."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_span_id(self) -> int:
        return self.span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


class GatewayTracing:
    """Makes trace context for upstream requests and records the server spans afterwards."""

    def __init__(self, otlp_endpoint: str | None = None, service_name: str = "lanewatch-gateway") -> None:
        self._ids = _PresetIds()
        self._rng = random.Random()
        self._provider = TracerProvider(
            resource=Resource.create({"service.name": service_name}), id_generator=self._ids
        )
        if otlp_endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=otlp_endpoint)
            self._provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
        self._tracer = self._provider.get_tracer("lanewatch.gateway")
        self.exporting = bool(otlp_endpoint)

    def ids_for(self, headers: Mapping[str, str]) -> TraceIds:
        """Ids for a request's server span: in the client's trace when it sent a valid traceparent."""
        span_id = self._rng.getrandbits(64) or 1
        parent = parse_traceparent(headers.get(TRACEPARENT))
        if parent is None:
            return TraceIds(self._rng.getrandbits(128) or 1, span_id, sampled=True)
        trace_id, parent_span_id, sampled = parent
        return TraceIds(trace_id, span_id, sampled, parent_span_id, headers.get(TRACESTATE))

    def inject(self, ids: TraceIds, carrier: MutableMapping[str, str]) -> None:
        """Write `traceparent` (and the client's `tracestate`) into upstream request headers."""
        carrier[TRACEPARENT] = ids.traceparent
        if ids.tracestate:
            carrier[TRACESTATE] = ids.tracestate

    def record(
        self,
        ids: TraceIds,
        name: str,
        start_ns: int,
        end_ns: int,
        attributes: Mapping[str, AttributeValue],
    ) -> None:
        """Build and end the server span (SERVER kind) that `ids` announced upstream."""
        if not (ids.sampled and self.exporting):
            return  # without an exporter the span would go nowhere: building it costs ~30 µs a request
        context = None
        if ids.parent_span_id is not None:
            state = TraceState.from_header([ids.tracestate]) if ids.tracestate else None
            parent = SpanContext(ids.trace_id, ids.parent_span_id, True, TraceFlags(1), state)
            context = trace.set_span_in_context(NonRecordingSpan(parent))
        self._ids.trace_id, self._ids.span_id = ids.trace_id, ids.span_id
        span = self._tracer.start_span(
            name, context=context, kind=SpanKind.SERVER, attributes=attributes, start_time=start_ns
        )
        span.end(end_time=end_ns)

    def shutdown(self) -> None:
        """Flush and stop the exporter."""
        self._provider.shutdown()
