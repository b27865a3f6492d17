"""OTLP/HTTP traces in: vLLM's `llm_request` spans, decoded to `ServerSpan`s.

`handle_export` is the whole receiver as a pure function over the request body and
headers (protobuf `ExportTraceServiceRequest` or OTLP JSON, optionally gzip); the HTTP
app in service.py only reads the body and writes what it returns. Span and attribute
names are vLLM's (its `llm_request` span and `gen_ai.*` attributes). Error bodies are `google.rpc.Status`,
as the OTLP/HTTP specification asks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from lanewatch.collector.collect.otlp_wire import (
    Admission,
    ExportResult,
    OtlpError,
    Refusal,
    admit,
    any_value,
    handle_http,
    json_list,
    json_value,
)
from lanewatch.collector.record.evidence import ServerSpan, span_problem

# vLLM's span (vllm/tracing): one per finished request.
LLM_REQUEST_SPAN = "llm_request"
ATTR_QUEUE = "gen_ai.latency.time_in_queue"
ATTR_PREFILL = "gen_ai.latency.time_in_model_prefill"
ATTR_DECODE = "gen_ai.latency.time_in_model_decode"
ATTR_TTFT = "gen_ai.latency.time_to_first_token"
ATTR_E2E = "gen_ai.latency.e2e"
ATTR_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
ATTR_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
ATTR_REQUEST_ID = "gen_ai.request.id"
RESOURCE_SERVICE_NAME = "service.name"
MAX_SERVICE_CHARS = 64  # of a resource's service.name kept in a sender key

# A request body past this is decoded on a worker thread, so the loop serving /metrics and the
# join goes on between the decoder's GIL slices (an 8 MiB body of 44,000 spans takes ~0.3 s).
OFF_LOOP_BYTES = 256 * 1024


def span_from_attributes(
    trace_id: str, attrs: Mapping[str, Any], parent_span_id: str | None = None, sender: str = ""
) -> ServerSpan | None:
    """A ServerSpan from a span's attributes; None without the three phase attributes."""
    try:
        queue, prefill, decode = (float(attrs[k]) for k in (ATTR_QUEUE, ATTR_PREFILL, ATTR_DECODE))
    except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: an int no float holds
        return None
    if trace_id.strip("0") == "":
        return None  # an invalid (all-zero) trace id can join nothing
    return ServerSpan(
        trace_id=trace_id,
        queue_s=queue,
        prefill_s=prefill,
        decode_s=decode,
        request_id=_opt(attrs.get(ATTR_REQUEST_ID), str),
        ttft_s=_opt(attrs.get(ATTR_TTFT), float),
        e2e_s=_opt(attrs.get(ATTR_E2E), float),
        prompt_tokens=_opt(attrs.get(ATTR_PROMPT_TOKENS), int),
        completion_tokens=_opt(attrs.get(ATTR_COMPLETION_TOKENS), int),
        parent_span_id=parent_span_id if parent_span_id and parent_span_id.strip("0") else None,
        sender=sender,
    )


def sender_key(peer: str, service: Any) -> str:
    """The join's fairness key for spans from `peer` (a host) under a resource `service.name`."""
    name = service if isinstance(service, str) else ""
    return f"{peer}/{name[:MAX_SERVICE_CHARS]}" if peer or name else ""


def _opt(value: Any, kind: type[Any]) -> Any:
    try:
        return None if value is None else kind(value)
    except (TypeError, ValueError, OverflowError):  # int(inf), float(10**400)
        return None


def decode_protobuf(body: bytes, peer: str = "") -> list[ServerSpan]:
    """The `llm_request` spans in a protobuf ExportTraceServiceRequest (`peer`: the sender's host)."""
    try:
        req = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise OtlpError(400, f"not an OTLP protobuf ExportTraceServiceRequest: {exc}") from None
    spans = []
    for rs in req.resource_spans:
        service = next(
            (any_value(kv.value) for kv in rs.resource.attributes if kv.key == RESOURCE_SERVICE_NAME), ""
        )
        sender = sender_key(peer, service)
        for ss in rs.scope_spans:
            for span in ss.spans:
                if span.name != LLM_REQUEST_SPAN:
                    continue
                attrs = {kv.key: any_value(kv.value) for kv in span.attributes}
                parsed = span_from_attributes(span.trace_id.hex(), attrs, span.parent_span_id.hex(), sender)
                if parsed is not None:
                    spans.append(parsed)
    return spans


def decode_json(body: bytes, peer: str = "") -> list[ServerSpan]:
    """The `llm_request` spans in an OTLP JSON request (hex trace ids, camelCase keys)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than Python's stack
        raise OtlpError(400, f"not JSON: {str(exc)[:200]}") from None
    try:
        return list(_json_spans(doc, peer))
    except (AttributeError, TypeError, KeyError) as exc:
        raise OtlpError(400, f"not an OTLP JSON ExportTraceServiceRequest: {exc!r}") from None


def _json_spans(doc: Any, peer: str) -> Iterable[ServerSpan]:
    for rs in json_list(doc, "resourceSpans"):
        sender = sender_key(peer, _json_service(rs.get("resource")))
        for ss in json_list(rs, "scopeSpans"):
            for span in json_list(ss, "spans"):
                if span.get("name") != LLM_REQUEST_SPAN:
                    continue
                trace_id = span.get("traceId", "")
                if not isinstance(trace_id, str) or len(trace_id) != 32:
                    raise TypeError(f"traceId must be 32 hex digits, got {trace_id!r}")
                attrs = {a["key"]: json_value(a.get("value") or {}) for a in span.get("attributes") or ()}
                parent = span.get("parentSpanId")
                parent = parent.lower() if isinstance(parent, str) and len(parent) == 16 else None
                parsed = span_from_attributes(trace_id.lower(), attrs, parent, sender)
                if parsed is not None:
                    yield parsed


def _json_service(resource: Any) -> Any:
    attrs = resource.get("attributes") if isinstance(resource, dict) else None
    for a in attrs if isinstance(attrs, list) else ():
        if isinstance(a, dict) and a.get("key") == RESOURCE_SERVICE_NAME and isinstance(a.get("value"), dict):
            return json_value(a["value"])
    return ""


def _take_span(span: ServerSpan) -> ServerSpan | Refusal:
    problem = span_problem(span)
    return span if problem is None else Refusal(problem)


def admit_spans(spans: list[ServerSpan], max_spans: int | None) -> Admission[ServerSpan]:
    """The spans to take, and those refused (bad times, past `max_spans`).

    OTLP/HTTP and OTLP/gRPC both admit through here, so both refuse the same spans alike.
    """
    return admit(spans, max_spans, _take_span, lambda _, s: f"trace {s.trace_id}", "llm_request spans")


def trace_response(admission: Admission[ServerSpan]) -> ExportTraceServiceResponse:
    """The OTLP answer: empty, or a partial success counting the refused spans and saying why."""
    answer = ExportTraceServiceResponse()
    if admission.rejected:
        partial = ExportTracePartialSuccess(rejected_spans=admission.rejected, error_message=admission.reason)
        answer.partial_success.CopyFrom(partial)
    return answer


def handle_export(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None,
    max_body_bytes: int,
    max_spans: int | None = None,
    peer: str = "",
) -> ExportResult[ServerSpan]:
    """Answer one OTLP/HTTP traces request: 200 with its spans, 400 bad body, 413 too large, 415.

    Spans with times no record may take, and spans past `max_spans`, are left out and counted
    in the answer's partial success (`rejected_spans`), as OTLP/HTTP provides. `peer` is the
    sender's host, for the spans' sender key.
    """
    return handle_http(
        body,
        content_type,
        content_encoding,
        max_body_bytes,
        lambda raw, as_json: decode_json(raw, peer) if as_json else decode_protobuf(raw, peer),
        lambda spans: admit_spans(spans, max_spans),
        trace_response,
    )
