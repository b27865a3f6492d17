"""The gateway ships its tap records to a real collector, which joins them to the simulators' spans.

Two `lanewatch sim` lanes send their `llm_request` spans to the collector; `lanewatch gateway
--collector` proxies streamed requests to them and ships its records. The collector's records
must carry each request's server phases as the simulator measured them, and the request
metrics must come from the collector alone. With the collector away, the gateway serves on and
counts what it could not ship.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.collect.serve import serve
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.exporters import names
from tests.servers import free_port, start_simulator
from tests.waiting import eventually_async

from .gateway_harness import chat_body, start_gateway, start_test_upstream

pytestmark = pytest.mark.integration


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Every sample of `name` by its sorted labels."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


@asynccontextmanager
async def collector(
    port: int, tmp_path: Path, join_wait_s: float = 10.0
) -> AsyncIterator[tuple[CollectorService, list[RequestTiming]]]:
    """A collector (receiver and ingest, no probes) serving on `port` in this loop; its emitted records."""
    cfg = LanewatchConfig(
        scrape={"enabled": False},
        gpu={"enabled": False},
        probe={"enabled": False},
        otlp={"join_wait_s": join_wait_s},
        server={"port": port},
        export={"records_path": str(tmp_path / "collector-records.jsonl")},
    )
    svc = CollectorService.from_config(cfg, source_factory=None)
    seen: list[RequestTiming] = []
    svc.add_listener(seen.append)
    stop = asyncio.Event()
    listening = asyncio.Event()
    task = asyncio.create_task(serve(svc, "127.0.0.1", port, stop, lambda _: listening.set()))
    await asyncio.wait_for(listening.wait(), 10)
    try:
        yield svc, seen
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def stream(client: httpx.AsyncClient, lane: str, model: str, max_tokens: int) -> str:
    """One streamed chat request through the gateway to `lane`; returns its request id."""
    request_id = f"ship-{uuid.uuid4().hex}"
    body = chat_body(max_tokens, content=f"tell me about {request_id}", model=model, ignore_eos=True)
    headers = {"x-lanewatch-lane": lane, "x-request-id": request_id}
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200
        async for _ in r.aiter_bytes():
            pass
    return request_id


async def test_tap_records_reach_the_collector_joined_to_the_servers_phases(tmp_path: Path) -> None:
    port = free_port()
    traces = f"http://127.0.0.1:{port}/v1/traces"
    async with collector(port, tmp_path) as (svc, seen):
        with (
            start_simulator(tmp_path, profile="fast", otlp_endpoint=traces) as fast,
            start_simulator(tmp_path, profile="slow", otlp_endpoint=traces) as slow,
            start_gateway(
                tmp_path,
                [f"fast={fast.url}", f"slow={slow.url}"],
                *("--collector", f"http://127.0.0.1:{port}", "--trust-hints", "127.0.0.0/8"),
            ) as gw,
        ):
            sims = {"fast": fast, "slow": slow}
            async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
                ids = await asyncio.gather(
                    *(
                        stream(client, lane, sims[lane].model, 8)
                        for lane in ("fast", "slow")
                        for _ in range(3)
                    )
                )
                await eventually_async(
                    lambda: sum(r.has_server_phases for r in seen) >= 6,
                    20,
                    "every record joined to its server phases",
                    context=lambda: f"{sum(r.has_server_phases for r in seen)} of {len(seen)} joined: {seen}",
                )
                gw_text = (await client.get("/metrics")).text
            col_text = svc.render_metrics().decode()
            truth = {r.request_id: sims[r.lane].truth(r.request_id or "") for r in seen}
    assert sorted(r.request_id or "" for r in seen) == sorted(ids)  # each request once
    for r in seen:
        t = truth[r.request_id]
        assert (r.source, r.trace_id, r.output_tokens) == ("tap", t["trace_id"], 8)
        for phase in ("queue", "prefill", "decode"):  # the span carries the simulator's own figures
            assert abs(getattr(r, f"{phase}_s") - t[f"{phase}_s"]) <= 0.002, (phase, r, t)
        assert r.ttft_s is not None and r.ttft_s >= t["ttft_s"]  # the client side waits for the server
    requests = samples(col_text, names.REQUESTS_TOTAL)
    by_lane = {dict(k)["lane"]: v for k, v in requests.items() if dict(k)["source"] == "tap"}
    assert by_lane == {"fast": 3, "slow": 3}
    assert samples(col_text, names.OTLP_SPANS_JOINED_TOTAL) == {(): 6.0}
    # The gateway exports no request metrics now (the collector does), only its own and shipping's.
    assert samples(gw_text, names.REQUESTS_TOTAL) == {}
    assert samples(gw_text, names.GATEWAY_SHIPPED_RECORDS_TOTAL) == {(): 6.0}
    assert sum(samples(gw_text, names.GATEWAY_REQUESTS_TOTAL).values()) == 6


async def test_with_the_collector_away_the_gateway_serves_counts_and_later_delivers(tmp_path: Path) -> None:
    port = free_port()  # nothing listens here until the collector starts below
    config = tmp_path / "gateway.yaml"
    with start_test_upstream(tmp_path, first_ms=1, gap_ms=1) as up:
        gateway = {
            "lanes": {"slow": {"upstreams": [up]}},
            "collector_url": f"http://127.0.0.1:{port}",
            "shipping": {"queue_records": 3, "interval_s": 0.05, "retry_initial_s": 0.05, "retry_max_s": 0.2},
        }
        config.write_text(yaml.safe_dump({"gateway": gateway}))
        with start_gateway(tmp_path, [], "-c", str(config)) as gw:
            async with httpx.AsyncClient(base_url=gw.url, timeout=10) as client:
                for _ in range(5):
                    r = await client.post("/v1/chat/completions", json=chat_body(3))
                    assert r.status_code == 200 and r.text.count("data:") >= 4

                def shipping() -> tuple[float, float, float, float]:
                    text = httpx.get(f"{gw.url}/metrics").text
                    return (
                        samples(text, names.GATEWAY_SHIP_SEND_FAILURES_TOTAL)[()],
                        samples(text, names.GATEWAY_SHIP_DROPPED_RECORDS_TOTAL)[(("reason", "queue_full"),)],
                        samples(text, names.GATEWAY_SHIP_QUEUED_RECORDS)[()],
                        samples(text, names.GATEWAY_SHIPPED_RECORDS_TOTAL)[()],
                    )

                # Failed sends are counted and retried; 5 records, room for 3: the 2 oldest went.
                await eventually_async(
                    lambda: shipping()[0] >= 2 and shipping()[1:] == (2, 3, 0),
                    10,
                    "two batches shipped, the retried one counted",
                    context=lambda: str(shipping()),
                )
                assert (await client.get("/healthz")).status_code == 200
                # The collector comes back (the test upstream sends no spans: its records wait briefly).
                async with collector(port, tmp_path, join_wait_s=0.2) as (_svc, seen):
                    await eventually_async(
                        lambda: len(seen) == 3, 10, "three records", context=lambda: str(seen)
                    )
                    text = (await client.get("/metrics")).text
                assert samples(text, names.GATEWAY_SHIPPED_RECORDS_TOTAL) == {(): 3.0}
                assert all(r.source == "tap" for r in seen)
        assert gw.process.returncode == 0  # SIGTERM: a clean exit
    assert "Traceback" not in gw.log_path.read_text()
