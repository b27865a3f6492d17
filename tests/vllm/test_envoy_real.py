"""Behind real Envoy, in front of a real vLLM: Envoy's access log and vLLM's spans meet at the collector.

Envoy 1.40 runs the shipped access-log bootstrap (deploy/envoy/access-log.yaml, ports rendered
for loopback, both lanes on the session's vLLM) and sends its OTLP access logs over OTLP/HTTP to
`lanewatch collect`'s port; vLLM's `llm_request` spans reach its `--otlp-grpc-listen` through the
span relay. Envoy's tracing sends a W3C traceparent upstream, so every record of source
`envoy` joins the span of its request: output tokens and queue/prefill/decode are vLLM's.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from lanewatch.collector.record.files import read_records
from lanewatch.collector.record.timing import RequestTiming
from tests.envoy import EnvoyHandle, access_log_bootstrap, start_envoy
from tests.servers import free_port, lanewatch_command, run_service
from tests.waiting import eventually

from .contract import decode_spans
from .engine import VllmHandle
from .relay import SpanRelay

pytestmark = pytest.mark.vllm

REQUESTS = 24  # half per lane, both lanes on the one engine
MAX_TOKENS = 6
IN_FLIGHT = 4


@contextmanager
def collector(tmp_path: Path, grpc_port: int) -> Iterator[tuple[Path, str]]:
    """`lanewatch collect` with its OTLP/gRPC listener; yields its records file and URL."""
    config = {
        "gpu": {"enabled": False},
        "scrape": {"enabled": False},
        "probe": {"enabled": False},
        "otlp": {"join_wait_s": 20.0},  # vLLM batches its span exports (~5 s)
    }
    path = tmp_path / "collect.yaml"
    path.write_text(json.dumps(config))
    port, records = free_port(), tmp_path / "records.jsonl"
    args = [*lanewatch_command(), "collect", "-c", str(path), "--port", str(port), "--records", str(records),
            "--otlp-grpc-listen", f"127.0.0.1:{grpc_port}"]  # fmt: skip
    with run_service(args, tmp_path / "collect.log", f"http://127.0.0.1:{port}/healthz"):
        yield records, f"http://127.0.0.1:{port}"


async def send_all(envoy: EnvoyHandle, model: str) -> list[dict[str, Any]]:
    """REQUESTS streamed chats through Envoy, IN_FLIGHT at a time, alternating the lanes."""
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(client: httpx.AsyncClient, i: int) -> dict[str, Any]:
        request_id = f"real-{uuid.uuid4().hex}"
        lane = ("fast", "slow")[i % 2]
        body = {
            "model": model, "max_tokens": MAX_TOKENS, "ignore_eos": True, "stream": True,
            "messages": [{"role": "user", "content": f"request {i} {request_id}"}],
        }  # fmt: skip
        headers = {"x-request-id": request_id, "x-lanewatch-lane": lane}
        async with gate, client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
            text = (await r.aread()).decode()
        return {"status": r.status_code, "done": "data: [DONE]" in text, "id": request_id, "lane": lane}

    async with httpx.AsyncClient(base_url=envoy.url, timeout=120) as client:
        return await asyncio.gather(*(one(client, i) for i in range(REQUESTS)))


def envoy_records(path: Path) -> list[RequestTiming]:
    """The records of source `envoy` written so far."""
    return [r for r in read_records(path).records if r.source == "envoy"] if path.exists() else []


def join_counters(url: str) -> str:
    """The collector's OTLP counters, for a failure's message."""
    page = httpx.get(f"{url}/metrics", timeout=10).text
    return "\n".join(line for line in page.splitlines() if line.startswith("lanewatch_otlp"))


@pytest.mark.timeout(600)
def test_every_request_through_envoy_joins_its_real_vllm_span(
    vllm_server: VllmHandle, span_relay: SpanRelay, tmp_path: Path, vllm_log: None
) -> None:
    grpc_port = free_port()
    port = int(vllm_server.url.rsplit(":", 1)[1])
    with (
        collector(tmp_path, grpc_port) as (records_path, collector_url),
        span_relay.forwarding_over_grpc_to(f"127.0.0.1:{grpc_port}"),
        start_envoy(
            tmp_path, access_log_bootstrap({"fast": port, "slow": port}, int(collector_url.rsplit(":", 1)[1]))
        ) as envoy,
    ):
        sent = asyncio.run(send_all(envoy, vllm_server.model))
        assert all(s["status"] == 200 and s["done"] for s in sent), sent[:3]
        eventually(
            lambda: len(envoy_records(records_path)) >= REQUESTS,
            90,
            "a record per request",
            every_s=0.5,
            context=lambda: join_counters(collector_url),
        )
        # the last exports of vLLM's batch can trail the records' join by a moment
        counters = join_counters(collector_url)
    records = envoy_records(records_path)
    assert len(records) == REQUESTS, [r.request_id for r in records]
    assert sorted(r.request_id or "" for r in records) == sorted(s["id"] for s in sent)
    assert sorted(r.lane for r in records) == sorted(s["lane"] for s in sent)
    assert all(r.status == 200 and r.error is None and r.target == f"127.0.0.1:{port}" for r in records)
    spans = {
        (s["trace_id"], s["parent_span_id"]): s["attributes"]
        for s in decode_spans(span_relay.snapshot())
        if s["name"] == "llm_request"
    }
    joined = [r for r in records if r.phases_source == "span" and (r.trace_id, r.span_id) in spans]
    unjoined = [r.to_json() for r in records if r not in joined][:2]
    assert len(joined) >= 0.99 * REQUESTS, f"{len(joined)}/{REQUESTS}\n{counters}\n{json.dumps(unjoined)}"
    for r in joined:  # each value is the one vLLM measured for this request
        attrs = spans[(r.trace_id, r.span_id)]
        assert r.output_tokens == attrs["gen_ai.usage.completion_tokens"] == MAX_TOKENS, r.to_json()
        assert r.prompt_tokens == attrs["gen_ai.usage.prompt_tokens"] and r.tokens_from_usage
        assert r.queue_s == pytest.approx(attrs["gen_ai.latency.time_in_queue"], abs=1e-6)
        assert r.prefill_s == pytest.approx(attrs["gen_ai.latency.time_in_model_prefill"], abs=1e-6)
        assert r.decode_s == pytest.approx(attrs["gen_ai.latency.time_in_model_decode"], abs=1e-6)
        assert r.ttft_s is not None and r.e2e_s is not None and 0 < r.ttft_s <= r.e2e_s + 0.001
