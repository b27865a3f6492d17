"""The collector's HTTP face on a real loopback socket: OTLP in, /metrics and /healthz out."""

from __future__ import annotations

import asyncio
import gzip
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from lanewatch.collector.collect.serve import serve
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.record.timing import RequestTiming
from tests.servers import closed_port

pytestmark = pytest.mark.integration


@asynccontextmanager
async def running(cfg: LanewatchConfig) -> AsyncIterator[tuple[CollectorService, str]]:
    svc = CollectorService.from_config(cfg, source_factory=None)
    stop = asyncio.Event()
    bound: list[int] = []
    task = asyncio.create_task(serve(svc, "127.0.0.1", 0, stop, bound.append))
    for _ in range(500):
        if bound or task.done():
            break
        await asyncio.sleep(0.01)
    if task.done():
        task.result()
    try:
        yield svc, f"http://127.0.0.1:{bound[0]}"
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def cfg(**overrides: Any) -> LanewatchConfig:
    data: dict[str, Any] = {"gpu": {"enabled": False}, "otlp": {"join_wait_s": 5.0, "max_body_bytes": 4096}}
    data.update(overrides)
    return LanewatchConfig(**data)


def vllm_span(exporter: OTLPSpanExporter) -> str:
    """Export one llm_request span as vLLM does; return its trace id."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("vllm.llm_engine").start_as_current_span(
        "llm_request", kind=trace.SpanKind.SERVER
    ) as s:
        s.set_attributes({
            "gen_ai.latency.time_in_queue": 0.011,
            "gen_ai.latency.time_in_model_prefill": 0.022,
            "gen_ai.latency.time_in_model_decode": 0.333,
        })  # fmt: skip
        trace_id = format(s.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id


async def test_otlp_exporter_span_joins_a_record() -> None:
    async with running(cfg()) as (svc, url):
        seen: list[RequestTiming] = []
        svc.add_listener(seen.append)
        exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces")
        trace_id = await asyncio.to_thread(vllm_span, exporter)
        svc.submit(RequestTiming(source="probe", target="t", lane="fast", request_class="short", model="m",
                                 status=200, trace_id=trace_id, ttft_s=0.1, e2e_s=0.5))  # fmt: skip
        assert len(seen) == 1 and (seen[0].queue_s, seen[0].prefill_s, seen[0].decode_s) == (
            0.011,
            0.022,
            0.333,
        )
        async with httpx.AsyncClient(base_url=url) as c:
            metrics = (await c.get("/metrics")).text
        assert "lanewatch_otlp_spans_joined_total 1.0" in metrics


async def test_receiver_refuses_bad_bodies_and_keeps_serving() -> None:
    async with running(cfg()) as (_, url), httpx.AsyncClient(base_url=url) as c:
        proto = {"content-type": "application/x-protobuf"}
        assert (await c.post("/v1/traces", content=b"\xff\xff\xff", headers=proto)).status_code == 400
        assert (
            await c.post("/v1/traces", content=b"{", headers={"content-type": "application/json"})
        ).status_code == 400
        assert (await c.post("/v1/traces", content=b"x" * 5000, headers=proto)).status_code == 413

        async def chunks() -> AsyncIterator[bytes]:  # no content-length: the limit holds while streaming
            for _ in range(10):
                yield b"x" * 1000

        assert (await c.post("/v1/traces", content=chunks(), headers=proto)).status_code == 413
        bomb = gzip.compress(b"\0" * 100_000)
        assert (
            await c.post("/v1/traces", content=bomb, headers={**proto, "content-encoding": "gzip"})
        ).status_code == 413
        assert (
            await c.post("/v1/traces", content=b"", headers={"content-type": "text/plain"})
        ).status_code == 415
        ok = await c.post("/v1/traces", content=b"", headers=proto)  # an empty request is valid protobuf
        assert ok.status_code == 200
        assert (await c.get("/healthz")).json()["status"] == "ok"


async def test_down_target_counts_errors_and_nothing_stops() -> None:
    dead = closed_port()
    targets = [{"name": "down", "url": f"http://127.0.0.1:{dead}", "model": "m"}]
    config = cfg(targets=targets, probe={"enabled": False}, scrape={"interval_s": 0.05, "timeout_s": 0.5})
    async with running(config) as (svc, url), httpx.AsyncClient(base_url=url) as c:
        for _ in range(100):
            stats = svc.server_windows["down"].stats(0)
            if stats.scrape_errors >= 3:
                break
            await asyncio.sleep(0.05)
        metrics = (await c.get("/metrics")).text
        assert 'lanewatch_scrape_up{lane="default",target="down"} 0.0' in metrics
        assert (await c.get("/healthz")).json()["scrape_up"] == {"down": False}
    assert stats.scrape_errors >= 3


async def test_taken_port_fails_clearly() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        svc = CollectorService.from_config(cfg(), source_factory=None)
        with pytest.raises(OSError, match="in use"):
            await serve(svc, "127.0.0.1", port, asyncio.Event(), lambda _: None)
