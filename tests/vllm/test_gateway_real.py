"""The gateway in front of a real vLLM: both APIs, streamed and not; its tap against usage and spans."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.integration.gateway_harness import eventually, gateway_server

from .contract import decode_spans
from .engine import SpanRelay, VllmHandle
from .traffic import send

pytestmark = pytest.mark.vllm

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
        assert await eventually(lambda: len(g.records) >= len(CASES), within_s=10)
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

    assert await eventually(lambda: {r.trace_id for r in g.records} <= joined(), within_s=15)
    spans = {s["trace_id"]: s["attributes"] for s in decode_spans(span_relay.snapshot())}
    for record in g.records:
        attrs = spans[record.trace_id]
        assert attrs["gen_ai.usage.completion_tokens"] == record.output_tokens
