"""The collector against the simulator's ground truth: scraped quantiles and joined spans."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from lanewatch.collector.collect.scrape import ServerWindow, bucket_index, scrape_once
from lanewatch.collector.collect.serve import serve
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.collector.record.window import QUANTILES
from lanewatch.exporters import names
from tests.servers import SimHandle, free_port, start_simulator
from tests.unit.collector.collect.test_scrape import rank_value
from tests.waiting import eventually_async

pytestmark = pytest.mark.integration


async def chat(client: httpx.AsyncClient, sim: SimHandle, words: int) -> str:
    """One streamed chat request with a known request id; returns the id."""
    request_id = f"scrape-{uuid.uuid4().hex}"
    text = " ".join(f"{request_id[-8:]}w{i}" for i in range(words))  # unique: no prefix-cache hits
    body = {
        "model": sim.model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 4,
        "ignore_eos": True,
        "stream": True,
    }
    async with client.stream(
        "POST", "/v1/chat/completions", json=body, headers={"x-request-id": request_id}
    ) as r:
        assert r.status_code == 200
        async for _ in r.aiter_bytes():
            pass
    return request_id


async def test_scraped_queue_and_prefill_quantiles_match_truth_within_one_bucket(tmp_path: Path) -> None:
    # One sequence at a time and a slow prefill: queue times spread over 0..~3 s and prefill
    # times over 0..~0.5 s, across several of vLLM's buckets (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5).
    with start_simulator(tmp_path, max_num_seqs=1, faults={"prefill_slowdown": 30.0}) as sim:
        window = ServerWindow("sim", "fast", window_s=600)
        async with httpx.AsyncClient(base_url=sim.url, timeout=60) as client:
            metrics_url = f"{sim.url}/metrics"
            window.add(await scrape_once(client, "sim", "fast", metrics_url, 5))
            ids = await asyncio.gather(*(chat(client, sim, 100 + 120 * i) for i in range(16)))
            window.add(await scrape_once(client, "sim", "fast", metrics_url, 5))
            truth = [(await client.get(f"/debug/requests/{i}")).json() for i in ids]
    stats = window.stats(now=time.monotonic())
    assert stats.up
    for phase, metric in (("queue", names.VLLM_REQUEST_QUEUE_TIME_SECONDS),
                          ("prefill", names.VLLM_REQUEST_PREFILL_TIME_SECONDS)):  # fmt: skip
        hist = window.window_histogram(metric)
        assert hist is not None and hist.count == 16
        true_values = sorted(t[f"{phase}_s"] for t in truth)
        for q in QUANTILES:
            scraped = stats.phase_quantiles[phase][q]
            true = rank_value(true_values, q)
            gap = abs(bucket_index(hist.bounds, scraped) - bucket_index(hist.bounds, true))
            assert gap <= 1, (phase, q, scraped, true)
    assert max(t["queue_s"] for t in truth) > 1.0  # the scenario did spread the queue


def probe_config(sim: SimHandle, collector_port: int) -> LanewatchConfig:
    targets = [{"name": f"sim{i}", "url": sim.url, "lane": "fast", "model": sim.model} for i in range(4)]
    classes: list[dict[str, Any]] = [
        {"name": "short", "prompt_words": 12, "max_tokens": 8},
        {"name": "long-in", "prompt_words": 600, "max_tokens": 4},
    ]
    return LanewatchConfig(
        targets=targets,
        probe={"interval_s": 0.05, "jitter_ratio": 0.0, "concurrency": 8, "classes": classes},
        scrape={"enabled": False},
        gpu={"enabled": False},
        otlp={"join_wait_s": 5.0},
        server={"port": collector_port},
    )


async def test_probe_records_carry_the_servers_phases(tmp_path: Path) -> None:
    port = free_port()
    with start_simulator(tmp_path, otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces") as sim:
        svc = CollectorService.from_config(probe_config(sim, port))
        records: list[RequestTiming] = []
        enough = asyncio.Event()

        def collect(record: RequestTiming) -> None:
            records.append(record)
            if len(records) >= 200:
                enough.set()

        svc.add_listener(collect)
        stop = asyncio.Event()
        task = asyncio.create_task(serve(svc, "127.0.0.1", port, stop, lambda _: None))
        await asyncio.wait_for(enough.wait(), 60)
        stop.set()
        await asyncio.wait_for(task, 15)  # drains: records still waiting get their spans
        with sim.client() as c:
            truth = {r.request_id: c.get(f"/debug/requests/{r.request_id}").json() for r in records}
    ok = [r for r in records if r.ok]
    assert len(ok) >= 200
    joined = [r for r in ok if r.has_server_phases]
    assert len(joined) >= 0.99 * len(ok), f"{len(joined)} of {len(ok)} joined"
    for r in joined:
        t = truth[r.request_id]
        assert r.trace_id == t["trace_id"]
        for phase in ("queue", "prefill", "decode"):
            assert abs(getattr(r, f"{phase}_s") - t[f"{phase}_s"]) <= 0.002, (phase, r, t)
    stats = svc.joiner.stats if svc.joiner is not None else None
    assert stats is not None and stats.spans_joined == len(joined)


async def test_an_https_target_is_scraped_with_its_own_ca_bundle(tmp_path: Path) -> None:
    # The simulator's self-signed certificate is trusted only through the target's cacert.
    port = free_port()
    with start_simulator(tmp_path, tls=True) as sim:
        target = {"name": "sim", "url": sim.url, "lane": "fast", "model": sim.model, "cacert": sim.cert_path}
        cfg = LanewatchConfig(
            targets=[target],
            probe={"enabled": False},
            scrape={"interval_s": 0.2},
            gpu={"enabled": False},
            server={"port": port},
        )
        svc = CollectorService.from_config(cfg)
        stop = asyncio.Event()
        task = asyncio.create_task(serve(svc, "127.0.0.1", port, stop, lambda _: None))
        try:
            await eventually_async(
                lambda: svc.server_windows["sim"].stats(time.monotonic()).up,
                30,
                "a successful scrape of the HTTPS target",
                every_s=0.1,
            )
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)
