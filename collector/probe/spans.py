"""The probe's client span (OpenTelemetry GenAI conventions) and its phases as child spans.

The parent span starts before the request so its W3C `traceparent` goes upstream and
vLLM's `llm_request` span joins the same trace. The phase children are added after the
fact from the measured times. Prompt and response text reach a span only when the record
carries them (export.record_content), as GenAI opt-in attributes (collector/record/content.py).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from lanewatch.collector.openai_api.error_detail import SPAN_ATTRIBUTE, status_description
from lanewatch.collector.record.content import (
    INPUT_MESSAGES,
    OUTPUT_MESSAGES,
    input_messages,
    output_messages,
)
from lanewatch.collector.record.timing import Api, RequestTiming

# Operation names of the OpenTelemetry GenAI semantic conventions (`gen_ai.operation.name`).
OPERATION_NAMES: Mapping[Api, str] = {"chat": "chat", "completions": "text_completion"}
PROVIDER_NAME = "vllm"
TRACER_NAME = "lanewatch.probe"

_PROPAGATOR = TraceContextTextMapPropagator()


def trace_headers() -> tuple[dict[str, str], str]:
    """A fresh sampled W3C `traceparent` and its trace id, for a probe whose span goes nowhere.

    The server's span still joins the probe by this trace id; building, filling and ending an
    SDK span and its phase children only to drop them would cost more than the probe's own
    timing. Ids are random and never zero, as the SDK's own generator makes them.
    """
    trace_id = random.getrandbits(128) or 1
    span_id = random.getrandbits(64) or 1
    tid = format(trace_id, "032x")
    return {"traceparent": f"00-{tid}-{span_id:016x}-01"}, tid


def start_probe_span(
    tracer: Tracer,
    *,
    api: Api,
    model: str,
    host: str,
    port: int,
    max_tokens: int,
    start_ns: int,
    attributes: Mapping[str, str],
) -> tuple[Span, dict[str, str], str | None]:
    """Start the client span; return it, the headers that carry its context, and its trace id."""
    operation = OPERATION_NAMES[api]
    span = tracer.start_span(
        f"{operation} {model}",
        kind=SpanKind.CLIENT,
        start_time=start_ns,
        attributes={
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": PROVIDER_NAME,
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": max_tokens,
            "server.address": host,
            "server.port": port,
            **attributes,
        },
    )
    headers: dict[str, str] = {}
    _PROPAGATOR.inject(headers, context=trace.set_span_in_context(span))
    ctx = span.get_span_context()
    trace_id = format(ctx.trace_id, "032x") if ctx.is_valid else None
    return span, headers, trace_id


def finish_probe_span(
    tracer: Tracer,
    span: Span,
    record: RequestTiming,
    intervals: Mapping[str, tuple[float, float]],
    start_ns: int,
    finish_reason: str | None = None,
) -> None:
    """Add the phase children (offsets in seconds from `start_ns`, wall clock) and end the span."""
    if record.prompt_text is not None:
        span.set_attribute(INPUT_MESSAGES, input_messages([("user", record.prompt_text)]))
    if record.response_text is not None:
        span.set_attribute(OUTPUT_MESSAGES, output_messages(record.response_text, finish_reason))
    if record.prompt_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", record.prompt_tokens)
    if record.output_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", record.output_tokens)
    if record.status is not None:
        span.set_attribute("http.response.status_code", record.status)
    if record.ttft_s is not None:
        span.set_attribute("lanewatch.ttft_s", record.ttft_s)
    if record.error is not None:
        span.set_attribute("error.type", record.error.value)
        if record.error_message is not None:
            span.set_attribute(SPAN_ATTRIBUTE, record.error_message)
        span.set_status(
            Status(StatusCode.ERROR, status_description(record.error.value, record.error_message))
        )
    parent = trace.set_span_in_context(span)
    for name, (begin, end) in intervals.items():
        child = tracer.start_span(
            name, context=parent, kind=SpanKind.INTERNAL, start_time=start_ns + _ns(begin)
        )
        child.set_attribute("lanewatch.phase", name)
        child.end(end_time=start_ns + _ns(end))
    span.end(end_time=start_ns + _ns(record.e2e_s or 0.0))


def _ns(seconds: float) -> int:
    return round(max(seconds, 0.0) * 1e9)
