"""OTLP/HTTP traces in: vLLM's `llm_request` spans, decoded to `ServerSpan`s.

`handle_export` is the whole receiver as a pure function over the request body and
headers (protobuf `ExportTraceServiceRequest` or OTLP JSON, optionally gzip); the HTTP
app in service.py only reads the body and writes what it returns. Span and attribute
names are vLLM's (its `llm_request` span and `gen_ai.*` attributes). Error bodies are `google.rpc.Status`,
as the OTLP/HTTP specification asks.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from lanewatch.collector.common.errors import ProtocolViolation
from lanewatch.collector.record.rules import bad_duration

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

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_GRPC_INVALID_ARGUMENT = 3
_GRPC_RESOURCE_EXHAUSTED = 8
_GRPC_UNIMPLEMENTED = 12
_GRPC_UNAUTHENTICATED = 16


@dataclass(frozen=True, slots=True)
class ServerSpan:
    """The server-side phases of one request, as vLLM's `llm_request` span reports them."""

    trace_id: str  # 32 lowercase hex digits
    queue_s: float
    prefill_s: float
    decode_s: float
    request_id: str | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class OtlpError(ProtocolViolation, ValueError):
    """A request the receiver refuses: `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def span_from_attributes(trace_id: str, attrs: Mapping[str, Any]) -> ServerSpan | None:
    """A ServerSpan from a span's attributes; None without the three phase attributes."""
    try:
        queue, prefill, decode = (float(attrs[k]) for k in (ATTR_QUEUE, ATTR_PREFILL, ATTR_DECODE))
    except (KeyError, TypeError, ValueError):
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
    )


def _opt(value: Any, kind: type[Any]) -> Any:
    try:
        return None if value is None else kind(value)
    except (TypeError, ValueError):
        return None


def decode_protobuf(body: bytes) -> list[ServerSpan]:
    """The `llm_request` spans in a protobuf ExportTraceServiceRequest."""
    try:
        req = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise OtlpError(400, f"not an OTLP protobuf ExportTraceServiceRequest: {exc}") from None
    spans = []
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                if span.name != LLM_REQUEST_SPAN:
                    continue
                attrs = {kv.key: _any_value(kv.value) for kv in span.attributes}
                parsed = span_from_attributes(span.trace_id.hex(), attrs)
                if parsed is not None:
                    spans.append(parsed)
    return spans


def _any_value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind in ("string_value", "bool_value", "int_value", "double_value") else None


def decode_json(body: bytes) -> list[ServerSpan]:
    """The `llm_request` spans in an OTLP JSON request (hex trace ids, camelCase keys)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than Python's stack
        raise OtlpError(400, f"not JSON: {str(exc)[:200]}") from None
    try:
        return list(_json_spans(doc))
    except (AttributeError, TypeError, KeyError) as exc:
        raise OtlpError(400, f"not an OTLP JSON ExportTraceServiceRequest: {exc!r}") from None


def _json_spans(doc: Any) -> Iterable[ServerSpan]:
    for rs in _json_list(doc, "resourceSpans"):
        for ss in _json_list(rs, "scopeSpans"):
            for span in _json_list(ss, "spans"):
                if span.get("name") != LLM_REQUEST_SPAN:
                    continue
                trace_id = span.get("traceId", "")
                if not isinstance(trace_id, str) or len(trace_id) != 32:
                    raise TypeError(f"traceId must be 32 hex digits, got {trace_id!r}")
                attrs = {a["key"]: _json_value(a.get("value") or {}) for a in span.get("attributes") or ()}
                parsed = span_from_attributes(trace_id.lower(), attrs)
                if parsed is not None:
                    yield parsed


def _json_list(obj: Any, key: str) -> list[Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"expected an object holding {key!r}")
    value = obj.get(key) or []
    if not isinstance(value, list):
        raise TypeError(f"{key!r} must be a list")
    return value


def _json_value(v: Mapping[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "intValue", "doubleValue"):
        if key in v:
            return v[key]  # intValue arrives as a string (int64 in JSON); the span reader converts
    return None


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What to answer a POST /v1/traces with, and the spans it carried."""

    status: int
    media_type: str
    body: bytes
    spans: list[ServerSpan] = field(default_factory=list)
    rejected: int = 0  # spans left out (bad times, past the per-request bound)
    reason: str = ""  # why the first of them was


def span_problem(span: ServerSpan) -> str | None:
    """Why no record may take this span's times (NaN, infinite or negative), or None."""
    for name in ("queue_s", "prefill_s", "decode_s", "ttft_s", "e2e_s"):
        if bad_duration(getattr(span, name)):
            return f"{name.removesuffix('_s')} is not a finite, non-negative number of seconds"
    return None


def admit_spans(spans: list[ServerSpan], max_spans: int | None) -> tuple[list[ServerSpan], int, str]:
    """The spans to take, how many are rejected, and the first reason (bad times, or past the bound)."""
    kept: list[ServerSpan] = []
    rejected, why = 0, ""
    for span in spans:
        problem = span_problem(span)
        if problem is None and max_spans is not None and len(kept) >= max_spans:
            problem = f"more than {max_spans} llm_request spans in one request"
        if problem is None:
            kept.append(span)
            continue
        rejected += 1
        why = why or f"trace {span.trace_id}: {problem}"
    return kept, rejected, why


def handle_export(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None,
    max_body_bytes: int,
    max_spans: int | None = None,
) -> ExportResult:
    """Answer one OTLP/HTTP traces request: 200 with its spans, 400 bad body, 413 too large, 415.

    Spans with times no record may take, and spans past `max_spans`, are left out and counted
    in the answer's partial success (`rejected_spans`), as OTLP/HTTP provides.
    """
    media = (content_type or "").split(";")[0].strip().lower()
    as_json = media == JSON
    try:
        if media not in (PROTOBUF, JSON):
            raise OtlpError(415, f"Content-Type must be {PROTOBUF} or {JSON}, got {media or 'none'}")
        raw = _decompress(body, content_encoding, max_body_bytes)
        spans = decode_json(raw) if as_json else decode_protobuf(raw)
    except OtlpError as exc:
        return _error(exc, as_json)
    spans, rejected, why = admit_spans(spans, max_spans)
    answer = ExportTraceServiceResponse()
    if rejected:
        answer.partial_success.CopyFrom(ExportTracePartialSuccess(rejected_spans=rejected, error_message=why))
    if as_json:
        return ExportResult(200, JSON, json.dumps(MessageToDict(answer)).encode(), spans, rejected, why)
    return ExportResult(200, PROTOBUF, answer.SerializeToString(), spans, rejected, why)


def too_large(content_type: str | None, limit: int) -> ExportResult:
    """The 413 answer for a body known to exceed `limit` before it was read."""
    as_json = (content_type or "").split(";")[0].strip().lower() == JSON
    return _error(OtlpError(413, f"body larger than {limit} bytes"), as_json)


def unauthorized(content_type: str | None) -> ExportResult:
    """The 401 answer for a request without the configured bearer token."""
    as_json = (content_type or "").split(";")[0].strip().lower() == JSON
    return _error(OtlpError(401, "missing or wrong bearer token"), as_json)


def _decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    if len(body) > limit:
        raise OtlpError(413, f"body larger than {limit} bytes")
    enc = (encoding or "identity").strip().lower()
    if enc == "identity":
        return body
    if enc != "gzip":
        raise OtlpError(415, f"Content-Encoding {enc!r} not supported (gzip or none)")
    d = zlib.decompressobj(wbits=31)
    try:
        out = d.decompress(body, limit + 1)  # never inflate past the limit
    except zlib.error as exc:
        raise OtlpError(400, f"bad gzip body: {exc}") from None
    if len(out) > limit:
        raise OtlpError(413, f"body larger than {limit} bytes once decompressed")
    return out


def _error(exc: OtlpError, as_json: bool) -> ExportResult:
    code = {
        401: _GRPC_UNAUTHENTICATED,
        413: _GRPC_RESOURCE_EXHAUSTED,
        415: _GRPC_UNIMPLEMENTED,
    }.get(exc.status, _GRPC_INVALID_ARGUMENT)
    if as_json:
        body = json.dumps({"code": code, "message": str(exc)}).encode()
        return ExportResult(exc.status, JSON, body)
    return ExportResult(
        exc.status, PROTOBUF, status_pb2.Status(code=code, message=str(exc)).SerializeToString()
    )
