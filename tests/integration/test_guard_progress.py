"""The gateway's requests under way reach the collector's fast guard, which fires into Alertmanager's
API while they still wait: a miss counts the moment a request's age passes the SLO, not when it ends.

In one event loop on 127.0.0.1: an upstream whose first token takes 20 s, the gateway reporting
progress to a real collector (guard on, the bundled SLO spec: the slow lane's TTFT SLO is 2 s), and
an HTTP server standing in for Alertmanager's `POST /api/v2/alerts` that keeps what it is sent.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from aiohttp import web

from lanewatch.collector.collect.serve import serve
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.config import LanewatchConfig
from tests.servers import free_port, serve_app, token_file
from tests.waiting import eventually_async

from .gateway_harness import TRUST_LOOPBACK, chat_body, gateway_server, upstream_server

pytestmark = pytest.mark.integration

FIRST_TOKEN_S = 20.0  # far past the slow lane's 2 s SLO: the guard must fire long before
WAITING = 6


async def _alertmanager() -> tuple[web.AppRunner, str, list[dict[str, Any]]]:
    posted: list[dict[str, Any]] = []

    async def alerts(request: web.Request) -> web.Response:
        posted.extend(await request.json())
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/api/v2/alerts", alerts)
    runner, url = await serve_app(app)
    return runner, url, posted


async def test_waiting_requests_fire_the_guard_before_their_first_token(tmp_path: Path) -> None:
    am_runner, am_url, posted = await _alertmanager()
    port = free_port()
    ingest_token, _ = token_file(tmp_path)
    cfg = LanewatchConfig(
        ingest={"token_file": ingest_token},
        scrape={"enabled": False},
        gpu={"enabled": False},
        probe={"enabled": False},
        otlp={"enabled": False},
        server={"port": port},
        guard={"enabled": True, "alertmanager_urls": [am_url]},
    )
    svc = CollectorService.from_config(cfg, source_factory=None)
    stop, listening = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(svc, "127.0.0.1", port, stop, lambda _: listening.set()))
    await asyncio.wait_for(listening.wait(), 10)
    collector_url = f"http://127.0.0.1:{port}"
    try:
        async with (
            upstream_server(first_ms=FIRST_TOKEN_S * 1000, model="slow-model") as (_, slow_url),
            upstream_server(model="fast-model") as (_, fast_url),
            gateway_server(
                {"slow": [slow_url], "fast": [fast_url]},
                hints=TRUST_LOOPBACK,
                collector_url=collector_url,
                collector_token_file=ingest_token,
                shipping={"progress_interval_s": 0.1},
            ) as gw,
        ):
            started = time.monotonic()
            async with aiohttp.ClientSession() as session:

                async def one() -> None:
                    body = json.dumps(chat_body(model="slow-model"))
                    headers = {"x-lanewatch-lane": "slow", "content-type": "application/json"}
                    async with session.post(f"{gw.url}/v1/chat/completions", data=body, headers=headers) as r:
                        await r.read()

                waiting = [asyncio.create_task(one()) for _ in range(WAITING)]
                await eventually_async(lambda: bool(posted), FIRST_TOKEN_S - 5, "the guard posting an alert")
                fired_after = time.monotonic() - started
                assert not any(t.done() for t in waiting), "a request ended before the guard fired"
                for t in waiting:
                    t.cancel()
                await asyncio.gather(*waiting, return_exceptions=True)
        alert = posted[0]
        assert alert["labels"] == {
            "alertname": "LanewatchTTFTMitigation",
            "action": "degrade",
            "lane": "slow",
            "severity": "mitigate",
            "slo": "ttft",
            "source": "guard",
        }
        assert fired_after >= 2.0, "fired before any request could have missed the 2 s SLO"
        async with httpx.AsyncClient(base_url=collector_url) as client:
            text = (await client.get("/metrics")).text
        assert 'lanewatch_guard_firing{lane="slow",slo="ttft"} 1.0' in text
        assert 'lanewatch_guard_verdicts_total{lane="slow",slo="ttft",verdict="missed"} 6.0' in text
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await am_runner.cleanup()


async def test_a_bad_progress_report_is_refused_and_a_bad_event_alone(tmp_path: Path) -> None:
    path, token = token_file(tmp_path)
    cfg = LanewatchConfig(
        ingest={"token_file": path},
        scrape={"enabled": False},
        gpu={"enabled": False},
        probe={"enabled": False},
        otlp={"enabled": False},
        guard={"enabled": True, "alertmanager_urls": ["http://127.0.0.1:9"]},
    )
    svc = CollectorService.from_config(cfg, source_factory=None)
    transport = httpx.ASGITransport(app=svc.app())
    json_ = {"content-type": "application/json", "authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://collector") as client:
        r = await client.post("/v1/progress", content=b"[1, 2]", headers=json_)
        assert r.status_code == 400
        assert "body" in r.json()["error"]["message"]
        good = [1, "slow", 5.0, False]
        report = {
            "reporter": "gw-1",
            "events": [good, [2, "slow", float("nan"), False], [3, "bad lane!", 1.0, True]],
        }
        r = await client.post("/v1/progress", content=json.dumps(report), headers=json_)
        assert r.status_code == 200
        assert r.json() == {"accepted": 1, "refused": 2}
        text = (await client.get("/metrics")).text
    assert "lanewatch_guard_progress_events_refused_total 2.0" in text
    assert 'lanewatch_guard_verdicts_total{lane="slow",slo="ttft",verdict="missed"} 1.0' in text
