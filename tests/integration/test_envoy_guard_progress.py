"""Envoy's periodic access-log entries reach the collector's fast guard while the request still waits.

Real Envoy 1.40 on deploy/envoy/access-log.yaml (`access_log_options.access_log_flush_interval`
0.2 s, `access_log_type` logged, periodic entries in a stream's first 3 s only) in front of a test
upstream whose first token takes 8 s, and a real collector (guard on, the bundled SLO spec: the
slow lane's TTFT SLO is 2 s) receiving the access log over OTLP/HTTP. Each request must be judged
missed within ~2 s of passing its SLO, long before it ends, and judged once only: its end entry
adds no second verdict. Its periodic entries stop at the window's end, long before its first
token; the test prints how many reached the collector per request.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from lanewatch.collector.collect.serve import serve
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.config import LanewatchConfig
from tests.envoy import access_log_bootstrap, start_envoy
from tests.servers import free_port, token_file
from tests.waiting import eventually_async

from .gateway_harness import upstream_server

pytestmark = pytest.mark.integration

FIRST_TOKEN_S = 8.0  # far past the slow lane's 2 s SLO
SLO_S = 2.0
IN_FLIGHT = 4
MISSED_WITHIN_S = SLO_S + 2.0  # the 0.2 s flush, Envoy's logger batching (1 s), the guard
WINDOW_S = 3.0  # the shipped bootstrap's duration_filter on periodic entries


async def test_envoy_requests_are_judged_missed_while_they_wait(tmp_path: Path) -> None:
    port = free_port()
    ingest_token, token = token_file(tmp_path)
    cfg = LanewatchConfig(
        ingest={"token_file": ingest_token},
        scrape={"enabled": False},
        gpu={"enabled": False},
        probe={"enabled": False},
        otlp={"enabled": True},
        server={"port": port},
        guard={"enabled": True, "alertmanager_urls": ["http://127.0.0.1:9"]},
    )
    svc = CollectorService.from_config(cfg, source_factory=None)
    assert svc.guard is not None
    verdicts = svc.guard.verdicts
    stop, listening = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(svc, "127.0.0.1", port, stop, lambda _: listening.set()))
    await asyncio.wait_for(listening.wait(), 10)
    try:
        async with upstream_server(first_ms=FIRST_TOKEN_S * 1000, gap_ms=10) as (_, up_url):
            up_port = int(up_url.rsplit(":", 1)[1])
            envoy_cm = start_envoy(
                tmp_path, access_log_bootstrap({"fast": up_port, "slow": up_port}, port, token)
            )
            envoy = await asyncio.to_thread(envoy_cm.__enter__)
            try:
                async with httpx.AsyncClient(base_url=envoy.url, timeout=30) as client:

                    async def one() -> int:
                        body = {"model": "m", "prompt": "x", "stream": True, "max_tokens": 2}
                        headers = {"x-lanewatch-lane": "slow"}
                        async with client.stream("POST", "/v1/completions", json=body, headers=headers) as r:
                            await r.aread()
                            return r.status_code

                    started = time.monotonic()
                    sent = [asyncio.create_task(one()) for _ in range(IN_FLIGHT)]
                    await eventually_async(
                        lambda: verdicts[("slow", "missed")] >= IN_FLIGHT,
                        MISSED_WITHIN_S,
                        "every waiting request judged missed from Envoy's periodic entries",
                    )
                    missed_after = time.monotonic() - started
                    assert not any(t.done() for t in sent), "a request ended before it was judged"
                    # the window: past its end and Envoy's batching, no more periodic entries come
                    await asyncio.sleep(max(0.0, WINDOW_S + 1.5 - (time.monotonic() - started)))
                    entries = svc.logs_progress
                    await asyncio.sleep(2.0)
                    after_window = svc.logs_progress - entries
                    assert svc.logs_received == 0  # periodic entries are no records
                    statuses = await asyncio.gather(*sent)
                    assert statuses == [200] * IN_FLIGHT
                    await eventually_async(lambda: svc.logs_received >= IN_FLIGHT, 5, "the end entries")
            finally:
                await asyncio.to_thread(envoy_cm.__exit__, None, None, None)
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
    assert SLO_S <= missed_after <= MISSED_WITHIN_S
    assert verdicts[("slow", "missed")] == IN_FLIGHT  # the end entries judged nothing twice
    assert verdicts[("slow", "met")] == 0
    assert after_window == 0, after_window  # none past the window, 5 s before the first token
    per_request = entries / IN_FLIGHT
    assert 10 <= per_request <= WINDOW_S / 0.2 + 1, per_request  # one each 0.2 s of the window
    result = {
        "first_token_s": FIRST_TOKEN_S,
        "slo_s": SLO_S,
        "missed_after_s": round(missed_after, 2),
        "periodic_entries_per_request": per_request,
        "progress_events": svc.logs_progress,
        "records": svc.logs_received,
    }
    print(json.dumps(result))
