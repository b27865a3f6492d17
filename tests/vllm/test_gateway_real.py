"""The gateway in front of a real vLLM: both APIs, streamed and not; its tap against usage and spans.

The tap records also go to a collector whose gRPC receiver gets the spans vLLM exports in its
default mode (OTLP/gRPC), where they must join.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest

from lanewatch.collector.collect.serve import serve
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.record.timing import RequestTiming
from tests.integration.gateway_harness import eventually, gateway_server, start_gateway
from tests.servers import free_port

from .contract import decode_spans
from .engine import VllmHandle
from .relay import SpanRelay
from .traffic import SPAN_WAIT_S, send

pytestmark = pytest.mark.vllm

TAP_REQUESTS = 100
CASES = [("chat", True), ("chat", False), ("completions", True), ("completions", False)]


async def test_tap_tokens_equal_usage_and_tap_records_join_real_spans(
    vllm_server: VllmHandle, span_relay: SpanRelay
) -> None:
    async with gateway_server({"fast": [vllm_server.url]}) as g:

        def through_gateway() -> list[tuple[str, bool, int, int, str]]:
            out = []
            with httpx.Client(base_url=g.url, timeout=120) as client:
                for api, stream in CASES:
                    sent = send(client, vllm_server.model, api, stream, max_tokens=10)
                    usage = sent.usage
                    out.append(
                        (api, stream, usage["prompt_tokens"], usage["completion_tokens"], sent.trace_id)
                    )
            return out

        results = await asyncio.to_thread(through_gateway)
        assert await eventually(lambda: len(g.records) >= len(CASES), within_s=30)
    by_trace = {r.trace_id: r for r in g.records}
    for api, stream, prompt_tokens, completion_tokens, trace_id in results:
        record = by_trace.get(trace_id)
        assert record is not None, (api, stream, [r.trace_id for r in g.records])
        assert record.ok and record.api == api, record
        assert (record.prompt_tokens, record.output_tokens) == (prompt_tokens, completion_tokens), (
            api,
            stream,
            record,
        )
        if stream:
            assert record.ttft_s is not None and record.ttft_s > 0

    def joined() -> set[str]:
        return {s["trace_id"] for s in decode_spans(span_relay.snapshot())}

    assert await eventually(lambda: {r.trace_id for r in g.records} <= joined(), within_s=SPAN_WAIT_S)
    spans = {s["trace_id"]: s["attributes"] for s in decode_spans(span_relay.snapshot())}
    for record in g.records:
        attrs = spans[record.trace_id]
        assert attrs["gen_ai.usage.completion_tokens"] == record.output_tokens


@pytest.mark.timeout(900)
async def test_tap_records_join_spans_sent_over_grpc_at_the_collector(
    vllm_server: VllmHandle, span_relay: SpanRelay, tmp_path: Path
) -> None:
    http_port, grpc_address = free_port(), f"127.0.0.1:{free_port()}"
    cfg = LanewatchConfig.model_validate({
        "scrape": {"enabled": False},
        "gpu": {"enabled": False},
        "probe": {"enabled": False},
        "otlp": {"join_wait_s": 20.0, "grpc_listen": grpc_address},
    })  # fmt: skip
    svc = CollectorService.from_config(cfg, source_factory=None)
    seen: list[RequestTiming] = []
    svc.add_listener(seen.append)
    stop, listening = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(svc, "127.0.0.1", http_port, stop, lambda _: listening.set()))
    await asyncio.wait_for(listening.wait(), 30)
    try:
        with (
            span_relay.forwarding_over_grpc_to(grpc_address),
            start_gateway(
                tmp_path, [f"default={vllm_server.url}"], "--collector", f"http://127.0.0.1:{http_port}"
            ) as gw,
        ):
            async with httpx.AsyncClient(base_url=gw.url, timeout=120) as client:
                gate = asyncio.Semaphore(4)

                async def one(i: int) -> None:
                    body = {
                        "model": vllm_server.model, "max_tokens": 4, "stream": i % 2 == 0, "ignore_eos": True,
                        "messages": [{"role": "user", "content": f"request {i} {uuid.uuid4().hex}"}],
                    }  # fmt: skip
                    async with gate:
                        r = await client.post("/v1/chat/completions", json=body)
                        assert r.status_code == 200, r.text

                await asyncio.gather(*(one(i) for i in range(TAP_REQUESTS)))
            assert await eventually(lambda: len(seen) >= TAP_REQUESTS, 120), f"{len(seen)} records"
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
    taps = [r for r in seen if r.source == "tap"]
    joined = [r for r in taps if r.phases_source == "span"]
    assert len(taps) == TAP_REQUESTS and all(r.ok for r in taps)
    print(f"tap records joined over gRPC: {len(joined)}/{TAP_REQUESTS}")
    assert len(joined) >= 0.99 * TAP_REQUESTS, f"{len(joined)}/{TAP_REQUESTS} joined"
