"""The OTLP/gRPC receiver's decision per Export call, without a server."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from lanewatch.collector.collect.otlp_grpc import caller, grpc_endpoint_url, handle_grpc_export, peer_host
from lanewatch.collector.collect.settings import OtlpReceiverConfig
from tests.unit.collector.collect.test_otlp import protobuf_body, sdk_spans


def authorized(metadata: Any, token: str | None) -> bool:
    """Whether the call's `authorization` metadata carries a configured token (none: open)."""
    return caller(metadata, token) is not None


def test_a_valid_request_is_ok_with_its_llm_request_spans() -> None:
    spans = sdk_spans(3) + sdk_spans(1, name="other")
    result = handle_grpc_export(protobuf_body(spans), 1 << 20)
    assert result.code is grpc.StatusCode.OK
    assert [s.trace_id for s in result.kept] == [format(s.context.trace_id, "032x") for s in spans[:3]]


def test_undecodable_bytes_are_invalid_argument_with_the_reason_and_no_spans() -> None:
    result = handle_grpc_export(b"\x0a\xff\xff\xff\x0f", 1 << 20)
    assert result.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "ExportTraceServiceRequest" in result.message and result.kept == []


def test_a_message_over_the_limit_is_resource_exhausted() -> None:
    body = protobuf_body(sdk_spans(5))
    result = handle_grpc_export(body, len(body) - 1)
    assert result.code is grpc.StatusCode.RESOURCE_EXHAUSTED and result.kept == []
    assert handle_grpc_export(body, len(body)).code is grpc.StatusCode.OK


def test_endpoint_url_has_no_path_and_names_a_wildcard_host() -> None:
    assert grpc_endpoint_url("127.0.0.1", 4317) == "http://127.0.0.1:4317"
    assert grpc_endpoint_url("::1", 4317) == "http://[::1]:4317"
    assert not grpc_endpoint_url("0.0.0.0", 4317).startswith("http://0.0.0.0")


def test_config_checks_the_grpc_address() -> None:
    assert OtlpReceiverConfig(grpc_listen="0.0.0.0:4317").grpc_listen == "0.0.0.0:4317"
    with pytest.raises(ValueError, match=r"\[HOST:\]PORT"):
        OtlpReceiverConfig(grpc_listen="host:")


def bad_then_good_body(n_bad: int, n_good: int) -> bytes:
    nan = sdk_spans(n_bad // 2, attrs={"gen_ai.latency.time_in_queue": float("nan"), **_PHASES})
    negative = sdk_spans(n_bad - n_bad // 2, attrs={**_PHASES, "gen_ai.latency.time_in_queue": -5.0})
    return protobuf_body(nan + negative + sdk_spans(n_good))


_PHASES = {"gen_ai.latency.time_in_model_prefill": 0.02, "gen_ai.latency.time_in_model_decode": 0.2}


def test_nan_and_negative_spans_are_refused_alone_with_a_partial_success() -> None:
    result = handle_grpc_export(bad_then_good_body(4, 3), 1 << 20)
    assert result.code is grpc.StatusCode.OK and len(result.kept) == 3
    answer = ExportTraceServiceResponse.FromString(result.body)
    assert answer.partial_success.rejected_spans == 4
    assert "not a finite, non-negative number" in answer.partial_success.error_message
    assert result.admission.refused() == {"invalid": 4}


def test_one_call_takes_at_most_the_span_bound_as_http_does() -> None:
    result = handle_grpc_export(protobuf_body(sdk_spans(2100)), 8 << 20)
    assert len(result.kept) == 2048 and result.admission.refused() == {"limit": 52}
    assert ExportTraceServiceResponse.FromString(result.body).partial_success.rejected_spans == 52
    clean = handle_grpc_export(protobuf_body(sdk_spans(2)), 1 << 20)
    assert clean.body == b""  # nothing refused: no partial_success at all


def test_the_token_is_the_bearer_token_in_authorization_metadata() -> None:
    assert authorized((), None)
    assert authorized((("authorization", "Bearer s3cret"),), "s3cret")
    assert authorized((("authorization", "bearer s3cret"),), "s3cret")
    for metadata in ((), (("authorization", "s3cret"),), (("authorization", "Bearer nope"),),
                     (("authorization", "Bearer s3cret"), ("authorization", "Bearer s3cret"))):  # fmt: skip
        assert not authorized(metadata, "s3cret")


def test_peer_host_drops_the_port() -> None:
    assert peer_host("ipv4:127.0.0.1:50123") == "127.0.0.1"
    assert peer_host("ipv6:[::1]:50123") == "::1"
    assert peer_host("unix:/tmp/s") == "unix:/tmp/s"
