"""Probe spans reach an OTLP/HTTP endpoint as protobuf, in the probe's trace."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from lanewatch.collector.probe.prober import Prober, ProbeSpec
from lanewatch.collector.probe.settings import Target
from lanewatch.exporters import otlp

from .scripted_server import Received, Reply, ScriptedServer, chat_stream

pytestmark = pytest.mark.integration


async def test_probe_spans_are_exported_over_otlp_http() -> None:
    batches: list[ExportTraceServiceRequest] = []

    def receive(req: Received) -> Reply:
        assert req.path == "/v1/traces"
        assert req.headers["content-type"] == "application/x-protobuf"
        batches.append(ExportTraceServiceRequest.FromString(req.body))
        return Reply(headers={"content-type": "application/x-protobuf"}, parts=[])

    async with (
        ScriptedServer(receive) as collector,
        ScriptedServer(lambda r: Reply(parts=chat_stream(3))) as llm,
    ):
        provider = otlp.tracer_provider(f"{collector.url()}/v1/traces", service_name="lanewatch-test")
        async with Prober(
            Target(name="t", url=llm.url("localhost"), model="m"), tracer=provider.get_tracer("t")
        ) as p:
            record = await p.probe(ProbeSpec("short", "chat", 3, prompt="PROMPT-TEXT"))
        assert await asyncio.to_thread(otlp.shutdown, provider, 5.0)
    spans = [s for b in batches for rs in b.resource_spans for ss in rs.scope_spans for s in ss.spans]
    resource = {a.key: a.value.string_value for a in batches[0].resource_spans[0].resource.attributes}
    assert resource["service.name"] == "lanewatch-test"
    assert {s.trace_id.hex() for s in spans} == {record.trace_id}
    parent = next(s for s in spans if not s.parent_span_id)
    assert parent.name == "chat m"
    attrs = {a.key: a.value for a in parent.attributes}
    assert attrs["gen_ai.usage.output_tokens"].int_value == 3
    assert {s.name for s in spans if s.parent_span_id == parent.span_id} >= {
        "dns",
        "connect",
        "send",
        "decode",
    }
    assert b"PROMPT-TEXT" not in b"".join(b.SerializeToString() for b in batches)
