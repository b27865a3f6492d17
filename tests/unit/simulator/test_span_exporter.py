"""The simulator picks vLLM's span exporter from the protocol, gRPC unless told otherwise."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

from lanewatch.simulator.tracing import DEFAULT_PROTOCOL, span_exporter


def test_grpc_is_the_default_as_in_vllm() -> None:
    assert DEFAULT_PROTOCOL == "grpc"
    exporter = span_exporter("http://127.0.0.1:4317")
    assert isinstance(exporter, GrpcExporter)
    exporter.shutdown()


def test_http_protobuf_gets_the_http_exporter() -> None:
    exporter = span_exporter("http://127.0.0.1:4318/v1/traces", "http/protobuf")
    assert isinstance(exporter, HttpExporter)  # nothing started: no shutdown needed


def test_other_protocols_are_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="grpc, http/protobuf"):
        span_exporter("http://127.0.0.1:4318", "http/json")
