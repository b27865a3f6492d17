"""Behind real Envoy alone, no lanewatch gateway: its access log feeds `lanewatch collect` over OTLP/gRPC.

Two simulator lanes behind Envoy 1.40 (deploy/envoy/access-log.yaml, ports rendered for loopback),
both exporting their `llm_request` spans to the same collector, which asks for a token that Envoy and
the simulators send. Every request sent through Envoy becomes one record of source `envoy`, and its
output tokens and queue/prefill/decode come from the span Envoy's traceparent led to.
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
from tests.servers import SimHandle, free_port, lanewatch_command, run_service, start_simulator
from tests.waiting import eventually

pytestmark = pytest.mark.integration

TOKEN = "envoy-ingest-token"
REQUESTS = 100  # half per lane
MAX_TOKENS = 6
CLASSES = ("interactive", "batch")


@contextmanager
def collector(tmp_path: Path, grpc_port: int) -> Iterator[tuple[Path, str]]:
    """`lanewatch collect` with its gRPC listener and the ingest token; yields its records file and URL."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    config = {
        "gpu": {"enabled": False},
        "scrape": {"enabled": False},
        "probe": {"enabled": False},
        "otlp": {"join_wait_s": 15.0},
        "ingest": {"token_file": str(tmp_path / "token")},
    }
    path = tmp_path / "collect.yaml"
    path.write_text(json.dumps(config))
    port, records = free_port(), tmp_path / "records.jsonl"
    args = [*lanewatch_command(), "collect", "-c", str(path), "--port", str(port), "--records", str(records),
            "--otlp-grpc-listen", f"127.0.0.1:{grpc_port}"]  # fmt: skip
    with run_service(args, tmp_path / "collect.log", f"http://127.0.0.1:{port}/healthz"):
        yield records, f"http://127.0.0.1:{port}"


async def one(client: httpx.AsyncClient, lane: SimHandle, name: str, i: int) -> dict[str, Any]:
    """One streamed chat request through Envoy to `lane`; what was sent and seen."""
    request_id = f"env-{uuid.uuid4().hex}"
    cls = CLASSES[i % 2]
    body = {
        "model": lane.model,
        "messages": [{"role": "user", "content": f"request {i} {request_id}"}],
        "max_tokens": MAX_TOKENS,
        "ignore_eos": True,
        "stream": True,
    }
    headers = {"x-request-id": request_id, "x-lanewatch-lane": name, "x-lanewatch-class": cls}
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        text = (await r.aread()).decode()
    return {
        "status": r.status_code,
        "done": "data: [DONE]" in text,
        "lane": name,
        "class": cls,
        "id": request_id,
    }


async def send_all(envoy: EnvoyHandle, lanes: dict[str, SimHandle]) -> list[dict[str, Any]]:
    gate = asyncio.Semaphore(8)
    names = sorted(lanes)

    async def bounded(client: httpx.AsyncClient, i: int) -> dict[str, Any]:
        async with gate:
            name = names[i % 2]
            return await one(client, lanes[name], name, i)

    async with httpx.AsyncClient(base_url=envoy.url, timeout=30) as client:
        return await asyncio.gather(*(bounded(client, i) for i in range(REQUESTS)))


def join_counters(url: str) -> str:
    """The collector's join counters, for a failure's message."""
    page = httpx.get(f"{url}/metrics", timeout=10).text
    return "\n".join(line for line in page.splitlines() if line.startswith("lanewatch_otlp"))


def envoy_records(path: Path) -> list[RequestTiming]:
    return [r for r in read_records(path).records if r.source == "envoy"] if path.exists() else []


def test_every_request_through_envoy_is_a_record_joined_to_its_vllm_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grpc_port = free_port()
    # The simulators export as vLLM does, with the token in the OTLP exporter's headers variable.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"authorization=Bearer%20{TOKEN}")
    endpoint = f"http://127.0.0.1:{grpc_port}"
    with (
        collector(tmp_path, grpc_port) as (records_path, collector_url),
        start_simulator(tmp_path, otlp_endpoint=endpoint, otlp_protocol="grpc") as fast,
        start_simulator(
            tmp_path, otlp_endpoint=endpoint, otlp_protocol="grpc", model="meta-llama/Llama-3.1-70B-Instruct"
        ) as slow,
    ):
        lanes = {"fast": fast, "slow": slow}
        http_port = int(collector_url.rsplit(":", 1)[1])  # Envoy sends over OTLP/HTTP, the sims over gRPC
        bootstrap = access_log_bootstrap({"fast": fast.port, "slow": slow.port}, http_port, token=TOKEN)
        with start_envoy(tmp_path, bootstrap) as envoy:
            sent = asyncio.run(send_all(envoy, lanes))
            assert all(s["status"] == 200 and s["done"] for s in sent), sent[:3]
            eventually(
                lambda: len(envoy_records(records_path)) >= REQUESTS,
                60,
                "a record per request",
                context=lambda: join_counters(collector_url),
            )
            counters = join_counters(collector_url)
    records = envoy_records(records_path)
    assert len(records) == REQUESTS
    assert all(r.status == 200 and r.error is None for r in records)
    by_lane = {name: [r for r in records if r.lane == name] for name in lanes}
    assert {name: len(rs) for name, rs in by_lane.items()} == {"fast": REQUESTS // 2, "slow": REQUESTS // 2}
    for name, sim in lanes.items():
        assert {r.target for r in by_lane[name]} == {f"127.0.0.1:{sim.port}"}
        assert {r.model for r in by_lane[name]} == {sim.model}  # the route's header, not the client's
    assert sorted(r.request_class for r in records) == sorted(s["class"] for s in sent)
    # Clients' own (not UUID) request ids: Envoy keeps them, and its trace sampling must not read them
    assert sorted(r.request_id or "" for r in records) == sorted(s["id"] for s in sent)
    for r in records:  # the first body byte is at or after the headers, and before the end
        assert r.ttft_s is not None and r.ttfb_s is not None and r.e2e_s is not None
        assert r.ttfb_s <= r.ttft_s <= r.e2e_s + 0.001
        assert r.trace_id is not None and r.span_id is not None
    joined = [r for r in records if r.phases_source == "span" and r.output_tokens == MAX_TOKENS]
    unjoined = [r.to_json() for r in records if r not in joined][:2]
    assert len(joined) >= 0.99 * REQUESTS, f"{counters}\n{json.dumps(unjoined)}"
    assert all(r.queue_s is not None and r.prefill_s is not None and r.decode_s is not None for r in joined)
    assert all(r.tokens_from_usage and (r.prompt_tokens or 0) > 0 for r in joined)
