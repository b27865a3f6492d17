"""vLLM's per-request metrics and the server's error message, end to end against `lanewatch sim`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lanewatch.collector.openai_api.error_detail import SPAN_ATTRIBUTE
from lanewatch.collector.probe.prober import Prober, ProbeSpec
from lanewatch.collector.probe.settings import Target
from lanewatch.collector.record.timing import ErrorKind
from tests.servers import SimHandle, free_port, start_simulator

from .gateway_harness import gateway_server
from .test_probe_cli import lanewatch

pytestmark = pytest.mark.integration

PHASES = ("queue", "prefill", "decode")
TOO_LONG = "This model's maximum context length is"


@pytest.fixture(scope="module")
def metrics_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with start_simulator(tmp_path_factory.mktemp("sim"), enable_per_request_metrics=True) as sim:
        yield sim


async def test_probe_takes_the_phases_from_the_usage_chunk_without_any_span(metrics_sim: SimHandle) -> None:
    code, out, err = await lanewatch(
        "probe", metrics_sim.url, "-m", metrics_sim.model, "-n", "5", "--class", "short", "--json"
    )
    assert code == 0, err
    for line in map(json.loads, out.splitlines()):
        assert line["phases_source"] == "response"
        truth = metrics_sim.truth(line["request_id"])
        for phase in PHASES:  # the same intervals as the span's, from the same engine timestamps
            assert abs(line[f"{phase}_s"] - truth[f"{phase}_s"]) <= 0.002, (phase, line, truth)
        assert line["response_ttft_s"] == line["prefill_s"]  # TTFT from scheduling is the prefill
        assert line["response_ttft_s"] < line["ttft_s"]  # not the client's TTFT from the request's start
        assert line["response_tokens_per_s"] > 0 and line["response_mean_itl_s"] > 0


async def test_a_joined_span_replaces_the_response_phases(tmp_path: Path) -> None:
    port = free_port()
    with start_simulator(
        tmp_path,
        otlp_endpoint=f"http://127.0.0.1:{port}",
        otlp_protocol="grpc",
        enable_per_request_metrics=True,
    ) as sim:
        code, out, err = await lanewatch(
            "probe", sim.url, "-m", sim.model, "-n", "4", "--json", "--otlp-grpc-listen", f"127.0.0.1:{port}"
        )
        assert code == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
    assert [line["phases_source"] for line in lines] == ["span"] * 4
    for line in lines:  # both from the engine's timestamps: they agree
        assert abs(line["queue_s"] - line["response_queue_s"]) <= 0.001
        assert abs(line["prefill_s"] - line["response_ttft_s"]) <= 0.001
        assert abs(line["decode_s"] - line["response_generation_s"]) <= 0.001


async def test_a_refused_request_carries_the_servers_message_on_record_and_span(
    metrics_sim: SimHandle,
) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    target = Target(name="sim", url=metrics_sim.url, model=metrics_sim.model)
    async with Prober(target, tracer=provider.get_tracer("t")) as prober:
        record = await prober.probe(ProbeSpec("huge", "chat", 10**6))
    assert (record.error, record.status) == (ErrorKind.HTTP_4XX, 400)
    assert record.error_message is not None and record.error_message.startswith(TOO_LONG)
    assert len(record.error_message) <= 200
    (span,) = [s for s in memory.get_finished_spans() if s.parent is None]
    assert span.attributes is not None and span.attributes[SPAN_ATTRIBUTE] == record.error_message
    assert span.status.description == f"http_4xx: {record.error_message}"


async def test_probe_prints_the_message_under_its_error(tmp_path: Path, metrics_sim: SimHandle) -> None:
    config = tmp_path / "classes.yaml"
    config.write_text("probe:\n  classes:\n    - {name: huge, prompt_words: 8, max_tokens: 100000}\n")
    code, _, err = await lanewatch(
        "probe", metrics_sim.url, "-m", metrics_sim.model, "--class", "huge", "-c", str(config)
    )
    assert code == 1
    assert "error http_4xx: 1 of 1 (HTTP 400)" in err and f"  {TOO_LONG}" in err


async def test_the_tap_records_response_metrics_and_upstream_messages(metrics_sim: SimHandle) -> None:
    async with gateway_server({"fast": [metrics_sim.url]}) as g, aiohttp.ClientSession() as s:
        for stream in (True, False):
            body = {
                "model": metrics_sim.model, "max_tokens": 5, "stream": stream, "ignore_eos": True,
                "messages": [{"role": "user", "content": "hello"}],
            }  # fmt: skip
            async with s.post(f"{g.url}/v1/chat/completions", json=body) as r:
                assert r.status == 200
                text = await r.text()
                assert ('"metrics"' in text) is not stream  # streamed: the gateway's own usage chunk, cut
        bad = {
            "model": metrics_sim.model,
            "max_tokens": 10**6,
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
        }
        async with s.post(f"{g.url}/v1/chat/completions", json=bad) as r:
            assert r.status == 400
            await r.read()  # the whole answer: leaving early can close the connection mid-body
    streamed, whole, refused = g.records
    for rec in (streamed, whole):
        assert rec.phases_source == "response" and rec.error is None
        truth = metrics_sim.truth(rec.request_id or "")
        assert rec.queue_s is not None and abs(rec.queue_s - truth["queue_s"]) <= 0.002
        assert rec.decode_s is not None and abs(rec.decode_s - truth["decode_s"]) <= 0.002
    assert refused.error is ErrorKind.HTTP_4XX
    assert refused.error_message is not None and refused.error_message.startswith(TOO_LONG)
