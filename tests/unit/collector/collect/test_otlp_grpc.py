"""The OTLP/gRPC receiver's decision per Export call, without a server."""

from __future__ import annotations

import grpc
import pytest

from lanewatch.collector.collect.otlp_grpc import grpc_endpoint_url, handle_grpc_export
from lanewatch.collector.config import OtlpReceiverConfig
from tests.unit.collector.collect.test_otlp import protobuf_body, sdk_spans


def test_a_valid_request_is_ok_with_its_llm_request_spans() -> None:
    spans = sdk_spans(3) + sdk_spans(1, name="other")
    result = handle_grpc_export(protobuf_body(spans), 1 << 20)
    assert result.code is grpc.StatusCode.OK
    assert [s.trace_id for s in result.spans] == [format(s.context.trace_id, "032x") for s in spans[:3]]


def test_undecodable_bytes_are_invalid_argument_with_the_reason_and_no_spans() -> None:
    result = handle_grpc_export(b"\x0a\xff\xff\xff\x0f", 1 << 20)
    assert result.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "ExportTraceServiceRequest" in result.message and result.spans == []


def test_a_message_over_the_limit_is_resource_exhausted() -> None:
    body = protobuf_body(sdk_spans(5))
    result = handle_grpc_export(body, len(body) - 1)
    assert result.code is grpc.StatusCode.RESOURCE_EXHAUSTED and result.spans == []
    assert handle_grpc_export(body, len(body)).code is grpc.StatusCode.OK


def test_endpoint_url_has_no_path_and_names_a_wildcard_host() -> None:
    assert grpc_endpoint_url("127.0.0.1", 4317) == "http://127.0.0.1:4317"
    assert grpc_endpoint_url("::1", 4317) == "http://[::1]:4317"
    assert not grpc_endpoint_url("0.0.0.0", 4317).startswith("http://0.0.0.0")


def test_config_checks_the_grpc_address() -> None:
    assert OtlpReceiverConfig(grpc_listen="0.0.0.0:4317").grpc_listen == "0.0.0.0:4317"
    with pytest.raises(ValueError, match=r"\[HOST:\]PORT"):
        OtlpReceiverConfig(grpc_listen="host:")
