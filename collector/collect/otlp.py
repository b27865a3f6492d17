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
RESOURCE_SERVICE_NAME = "service.name"
MAX_SERVICE_CHARS = 64  # of a resource's service.name kept in a sender key

# A request body past this is decoded on a worker thread, so the loop serving /metrics and the
# join goes on between the decoder's GIL slices (an 8 MiB body of 44,000 spans takes ~0.3 s).
OFF_LOOP_BYTES = 256 * 1024
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
    parent_span_id: str | None = None  # 16 lowercase hex digits: the span the request came in under
    sender: str = ""  # who sent it: "<peer host>/<resource service.name>" (the join's fairness key)


class OtlpError(ProtocolViolation, ValueError):
    """A request the receiver refuses: `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def span_from_attributes(
    trace_id: str, attrs: Mapping[str, Any], parent_span_id: str | None = None, sender: str = ""
) -> ServerSpan | None:
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
    except (TypeError, ValueError):
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
            (_any_value(kv.value) for kv in rs.resource.attributes if kv.key == RESOURCE_SERVICE_NAME), ""
        )
        sender = sender_key(peer, service)
        for ss in rs.scope_spans:
            for span in ss.spans:
                if span.name != LLM_REQUEST_SPAN:
                    continue
                attrs = {kv.key: _any_value(kv.value) for kv in span.attributes}
                parsed = span_from_attributes(span.trace_id.hex(), attrs, span.parent_span_id.hex(), sender)
                if parsed is not None:
                    spans.append(parsed)
    return spans


def _any_value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind in ("string_value", "bool_value", "int_value", "double_value") else None


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
    for rs in _json_list(doc, "resourceSpans"):
        sender = sender_key(peer, _json_service(rs.get("resource")))
        for ss in _json_list(rs, "scopeSpans"):
            for span in _json_list(ss, "spans"):
                if span.get("name") != LLM_REQUEST_SPAN:
                    continue
                trace_id = span.get("traceId", "")
                if not isinstance(trace_id, str) or len(trace_id) != 32:
                    raise TypeError(f"traceId must be 32 hex digits, got {trace_id!r}")
                attrs = {a["key"]: _json_value(a.get("value") or {}) for a in span.get("attributes") or ()}
                parent = span.get("parentSpanId")
                parent = parent.lower() if isinstance(parent, str) and len(parent) == 16 else None
                parsed = span_from_attributes(trace_id.lower(), attrs, parent, sender)
                if parsed is not None:
                    yield parsed


def _json_service(resource: Any) -> Any:
    attrs = resource.get("attributes") if isinstance(resource, dict) else None
    for a in attrs if isinstance(attrs, list) else ():
        if isinstance(a, dict) and a.get("key") == RESOURCE_SERVICE_NAME and isinstance(a.get("value"), dict):
            return _json_value(a["value"])
    return ""


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


# Why a span was refused: the closed set of `reason` values on lanewatch_otlp_spans_refused_total.
REFUSED_INVALID = "invalid"  # a time NaN, infinite or negative
REFUSED_LIMIT = "limit"  # past the per-request span bound
REFUSED_JOIN = "join"  # its record could not take its times (the join's last check)


@dataclass(frozen=True, slots=True)
class Admission:
    """The spans of one request that may reach the join, and how many were refused, by reason."""

    spans: list[ServerSpan] = field(default_factory=list)
    invalid: int = 0
    over_limit: int = 0
    reason: str = ""  # why the first refused span was

    @property
    def rejected(self) -> int:
        """Spans refused in all."""
        return self.invalid + self.over_limit

    def refused(self) -> dict[str, int]:
        """The refused counts by reason (only the non-zero ones)."""
        counts = {REFUSED_INVALID: self.invalid, REFUSED_LIMIT: self.over_limit}
        return {k: v for k, v in counts.items() if v}

    def response(self) -> ExportTraceServiceResponse:
        """The OTLP answer: empty, or a partial success counting the refused spans and saying why."""
        answer = ExportTraceServiceResponse()
        if self.rejected:
            partial = ExportTracePartialSuccess(rejected_spans=self.rejected, error_message=self.reason)
            answer.partial_success.CopyFrom(partial)
        return answer


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What to answer a POST /v1/traces with, and the spans it carried."""

    status: int
    media_type: str
    body: bytes
    admission: Admission = field(default_factory=Admission)

    @property
    def spans(self) -> list[ServerSpan]:
        """The spans admitted."""
        return self.admission.spans

    @property
    def rejected(self) -> int:
        """Spans left out (bad times, past the per-request bound)."""
        return self.admission.rejected

    @property
    def reason(self) -> str:
        """Why the first of them was."""
        return self.admission.reason


def span_problem(span: ServerSpan) -> str | None:
    """Why no record may take this span's times (NaN, infinite or negative), or None."""
    for name in ("queue_s", "prefill_s", "decode_s", "ttft_s", "e2e_s"):
        if bad_duration(getattr(span, name)):
            return f"{name.removesuffix('_s')} is not a finite, non-negative number of seconds"
    if (span.prompt_tokens or 0) < 0 or (span.completion_tokens or 0) < 0:
        return "a token count is negative"
    return None


def admit_spans(spans: list[ServerSpan], max_spans: int | None) -> Admission:
    """The spans to take, and those refused: bad times first, then past `max_spans`.

    OTLP/HTTP and OTLP/gRPC both admit through here, so both refuse the same spans alike.
    """
    kept: list[ServerSpan] = []
    invalid = over = 0
    why = ""
    for span in spans:
        problem = span_problem(span)
        if problem is not None:
            invalid += 1
        elif max_spans is not None and len(kept) >= max_spans:
            problem = f"more than {max_spans} llm_request spans in one request"
            over += 1
        else:
            kept.append(span)
            continue
        why = why or f"trace {span.trace_id}: {problem}"
    return Admission(kept, invalid, over, why)


def handle_export(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None,
    max_body_bytes: int,
    max_spans: int | None = None,
    peer: str = "",
) -> ExportResult:
    """Answer one OTLP/HTTP traces request: 200 with its spans, 400 bad body, 413 too large, 415.

    Spans with times no record may take, and spans past `max_spans`, are left out and counted
    in the answer's partial success (`rejected_spans`), as OTLP/HTTP provides. `peer` is the
    sender's host, for the spans' sender key.
    """
    media = (content_type or "").split(";")[0].strip().lower()
    as_json = media == JSON
    try:
        if media not in (PROTOBUF, JSON):
            raise OtlpError(415, f"Content-Type must be {PROTOBUF} or {JSON}, got {media or 'none'}")
        raw = _decompress(body, content_encoding, max_body_bytes)
        spans = decode_json(raw, peer) if as_json else decode_protobuf(raw, peer)
    except OtlpError as exc:
        return _error(exc, as_json)
    admission = admit_spans(spans, max_spans)
    answer = admission.response()
    if as_json:
        return ExportResult(200, JSON, json.dumps(MessageToDict(answer)).encode(), admission)
    return ExportResult(200, PROTOBUF, answer.SerializeToString(), admission)


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
