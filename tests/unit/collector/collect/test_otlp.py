from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from google.rpc import status_pb2
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lanewatch.collector.collect.otlp import ATTR_PREFILL, ATTR_QUEUE, decode_json, handle_export
from lanewatch.collector.collect.otlp_wire import JSON, PROTOBUF
from lanewatch.collector.record.evidence import ServerSpan

LIMIT = 64 * 1024
VLLM_ATTRS: dict[str, Any] = {
    "gen_ai.latency.time_in_queue": 0.0123,
    "gen_ai.latency.time_in_model_prefill": 0.0456,
    "gen_ai.latency.time_in_model_decode": 0.789,
    "gen_ai.latency.time_to_first_token": 0.06,
    "gen_ai.latency.e2e": 0.85,
    "gen_ai.latency.time_in_model_inference": 0.83,
    "gen_ai.usage.prompt_tokens": 17,
    "gen_ai.usage.completion_tokens": 16,
    "gen_ai.request.id": "chatcmpl-abc",
    "gen_ai.request.max_tokens": 16,
}


def sdk_spans(
    n: int = 1, name: str = "llm_request", attrs: dict[str, Any] | None = None
) -> list[ReadableSpan]:
    """Spans made by the OpenTelemetry SDK as vLLM makes them (tracer vllm.llm_engine, kind SERVER)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("vllm.llm_engine")
    for _ in range(n):
        with tracer.start_as_current_span(name, kind=trace.SpanKind.SERVER) as span:
            span.set_attributes(VLLM_ATTRS if attrs is None else attrs)
    return list(memory.get_finished_spans())


def protobuf_body(spans: list[ReadableSpan]) -> bytes:
    body: bytes = encode_spans(spans).SerializeToString()
    return body


def json_body(trace_id: str, attrs: dict[str, Any], name: str = "llm_request") -> bytes:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        return {"stringValue": v}

    span = {
        "traceId": trace_id,
        "spanId": "00f067aa0ba902b7",
        "name": name,
        "kind": 2,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()],
    }
    doc = {
        "resourceSpans": [
            {"resource": {}, "scopeSpans": [{"scope": {"name": "vllm.llm_engine"}, "spans": [span]}]}
        ]
    }
    return json.dumps(doc).encode()


def test_protobuf_from_the_sdk_exporter_decodes() -> None:
    spans = sdk_spans(3)
    result = handle_export(protobuf_body(spans), PROTOBUF, None, LIMIT)
    assert result.status == 200 and result.media_type == PROTOBUF
    assert len(result.kept) == 3
    first = result.kept[0]
    assert first.trace_id == format(spans[0].context.trace_id, "032x")
    assert (first.queue_s, first.prefill_s, first.decode_s) == (0.0123, 0.0456, 0.789)
    assert (first.prompt_tokens, first.completion_tokens, first.request_id) == (17, 16, "chatcmpl-abc")


def test_other_spans_and_spans_without_phases_are_ignored() -> None:
    other = sdk_spans(1, name="POST")
    partial = sdk_spans(1, attrs={ATTR_QUEUE: 0.1, ATTR_PREFILL: 0.2})  # no decode
    result = handle_export(protobuf_body(other + partial + sdk_spans(1)), PROTOBUF, None, LIMIT)
    assert result.status == 200 and len(result.kept) == 1


def test_gzip_body() -> None:
    body = gzip.compress(protobuf_body(sdk_spans(2)))
    result = handle_export(body, "application/x-protobuf; charset=binary", "gzip", LIMIT)
    assert result.status == 200 and len(result.kept) == 2


def test_json_body() -> None:
    tid = "4BF92F3577B34DA6A3CE929D0E0E4736"
    result = handle_export(json_body(tid, VLLM_ATTRS), JSON, None, LIMIT)
    assert result.status == 200 and result.body == b"{}"
    assert result.kept == [ServerSpan(tid.lower(), 0.0123, 0.0456, 0.789, "chatcmpl-abc", 0.06, 0.85, 17, 16)]


def test_json_all_zero_trace_id_joins_nothing() -> None:
    assert decode_json(json_body("0" * 32, VLLM_ATTRS)) == []


@pytest.mark.parametrize(
    ("body", "ctype"),
    [
        (b"\xff\xff\xff\x01garbage", PROTOBUF),
        (b"{not json", JSON),
        (b'{"resourceSpans": {"oops": 1}}', JSON),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "llm_request", "traceId": "xyz"}]}]}]}',
            JSON,
        ),
        (b"[1, 2]", JSON),
    ],
)
def test_bad_body_is_400_with_a_status_message(body: bytes, ctype: str) -> None:
    result = handle_export(body, ctype, None, LIMIT)
    assert result.status == 400 and not result.kept
    if ctype == PROTOBUF:
        assert status_pb2.Status.FromString(result.body).message
    else:
        assert json.loads(result.body)["message"]


def test_too_large_is_413_also_after_gzip() -> None:
    assert handle_export(b"\0" * (LIMIT + 1), PROTOBUF, None, LIMIT).status == 413
    bomb = gzip.compress(b"\0" * (LIMIT * 4))
    assert len(bomb) < LIMIT
    assert handle_export(bomb, PROTOBUF, "gzip", LIMIT).status == 413


def test_unsupported_media_is_415() -> None:
    assert handle_export(b"x", "text/plain", None, LIMIT).status == 415
    assert handle_export(b"x", None, None, LIMIT).status == 415
    assert handle_export(b"x", PROTOBUF, "br", LIMIT).status == 415
