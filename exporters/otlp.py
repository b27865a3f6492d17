"""lanewatch's own spans (the probe's client spans) to an OTLP/HTTP endpoint, when configured.

The SDK's `OTLPSpanExporter` has the exporter shape (`export(batch) -> result`,
`shutdown()`), and `BatchSpanProcessor` is the periodic driver that owns its thread.
This module only assembles them with lanewatch's resource and a short batch delay, so
spans reach a collector (and its trace join) promptly. Without an endpoint the provider
still records spans (real, sampled trace ids for `traceparent`) and exports nothing.
"""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

SERVICE_NAME = "lanewatch"
BATCH_DELAY_S = 0.2


def span_exporter(endpoint: str, timeout_s: float = 5.0) -> SpanExporter:
    """OTLP/HTTP protobuf exporter to the full traces URL (e.g. http://host:4318/v1/traces)."""
    return OTLPSpanExporter(endpoint=endpoint, timeout=timeout_s)


def tracer_provider(
    endpoint: str | None = None,
    *,
    service_name: str = SERVICE_NAME,
    exporter: SpanExporter | None = None,
    batch_delay_s: float = BATCH_DELAY_S,
) -> TracerProvider:
    """A tracer provider that batches spans to `endpoint` (or `exporter`); none: record only."""
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporter is None and endpoint:
        exporter = span_exporter(endpoint)
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=batch_delay_s * 1000))
    return provider


def shutdown(provider: TracerProvider, timeout_s: float = 5.0) -> bool:
    """Flush pending spans within `timeout_s`, then stop exporting; False if the flush timed out."""
    flushed = provider.force_flush(timeout_millis=int(timeout_s * 1000))
    provider.shutdown()
    return flushed
