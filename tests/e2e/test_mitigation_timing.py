"""Mitigation in seconds, in real time: the shipped rules in real Prometheus and Alertmanager.

The demo's stack on 127.0.0.1 (simulated lanes, gateway, collector, degrade controller), but
with the production rule file (alerts/generated/lanewatch-rules.yml) and the production
timings of deploy/prometheus (15s scrape, 5s for the collector, 30s evaluation; the
mitigation group evaluates every 5s) and deploy/alertmanager (the mitigation route:
group_wait 0s, group_interval 250ms). Traffic flows through the gateway the whole time, and
the collector probes both lanes. Two faults in the slow lane, each a 3s queue delay that puts every request's
TTFT over the 2s SLO:

1. a 15s blip: nothing degrades, no mitigation alert so much as exists, for the 75s that
   the 1m window remembers it (plus the slowest faulted request);
2. a sustained fault: the slow lane is shifted within 60s of the fault starting.

The controller acts on mitigation alerts only. Pages reach it too in deploy/alertmanager,
but a fresh Prometheus holds only minutes of data, so its 1h page window would see the blip
as a quarter of all requests and page (`for: 2m`) in the middle of the second part: an
artifact of starting empty, which production's hour of history does not have.

The figures measured are printed (docs/slo.md quotes them). The run takes about 3.5 minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from lanewatch.collector.demo import Layout, Stack, Supervisor, Tools, free_ports
from lanewatch.collector.demo.configs import MODEL
from lanewatch.collector.demo.events import lane_actions
from lanewatch.collector.demo.traffic import Traffic
from tests.conftest import require_binary

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

FAULT = {"queue_delay_s": 3.0}  # every slow-lane request: TTFT > 3s, over the 2s SLO
WARMUP_S = 45.0  # good traffic in the 1m window before the blip
BLIP_S = 15.0
BLIP_WATCH_S = 75.0  # the 1m window, plus the slowest faulted request finishing late
DEGRADE_WITHIN_S = 60.0  # the goal for a sustained breach
POLL_S = 0.5
MITIGATE = "mitigate"  # the severity of mitigation alerts, the only ones the controller acts on here
MITIGATION = 'ALERTS{alertname="LanewatchTTFTMitigation",lane="slow"}'
MITIGATION_FIRING = 'ALERTS{alertname="LanewatchTTFTMitigation",lane="slow",alertstate="firing"}'
SLOW_TTFT_MISS_1M = (
    '1 - sum(rate(lanewatch_ttft_seconds_bucket{lane="slow",le="2.0"}[1m]))'
    ' / sum(rate(lanewatch_ttft_seconds_count{lane="slow"}[1m]))'
)


async def _slow_lane_degraded(stack: Stack) -> dict[str, Any]:
    state = await stack.degrade_state()
    return lane_actions((state.get("lanes") or {}).get("slow") or {})


async def _watch_quiet(stack: Stack, seconds: float) -> None:
    """Fail as soon as the slow lane is degraded within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        on = await _slow_lane_degraded(stack)
        assert not on, f"a {BLIP_S:.0f}s blip degraded the slow lane: {on}"
        await asyncio.sleep(POLL_S)


async def _seconds_to_degrade(stack: Stack, since: float, limit: float) -> float:
    """Seconds from `since` (monotonic) until the slow lane is degraded; fails past `limit`."""
    while time.monotonic() - since < limit:
        if await _slow_lane_degraded(stack):
            return time.monotonic() - since
        await asyncio.sleep(POLL_S)
    raise AssertionError(f"the slow lane was not degraded within {limit:.0f}s of a sustained fault")


async def _scenario(stack: Stack, traffic: Traffic) -> dict[str, float]:
    figures: dict[str, float] = {}
    await asyncio.sleep(WARMUP_S)

    blip_at = time.time()
    await stack.set_fault("slow", FAULT)
    await _watch_quiet(stack, BLIP_S)
    await stack.clear_fault("slow")
    await _watch_quiet(stack, BLIP_WATCH_S)
    assert not await stack.query_range(MITIGATION, blip_at), "the blip raised a mitigation alert"
    peak = await stack.query_range(SLOW_TTFT_MISS_1M, blip_at)
    figures["blip_peak_miss_ratio"] = max(float(v) for s in peak for _, v in s["values"])

    fault_at, fault_unix = time.monotonic(), time.time()
    await stack.set_fault("slow", FAULT)
    figures["fault_to_degrade_s"] = await _seconds_to_degrade(stack, fault_at, DEGRADE_WITHIN_S + 30)
    firing = await stack.query_range(MITIGATION_FIRING, fault_unix)
    if firing:
        first = min(float(t) for s in firing for t, _ in s["values"])
        figures["fault_to_alert_s"] = first - fault_unix
    await stack.clear_fault("slow")
    figures["requests_sent"] = traffic.sent
    return figures


def test_shipped_rules_degrade_a_sustained_breach_within_a_minute_and_ignore_a_15s_blip() -> None:
    tools = Tools(require_binary("prometheus"), require_binary("prometheus-alertmanager"))
    with tempfile.TemporaryDirectory(prefix="lanewatch-mitigation-") as tmp:
        fast, slow, collector, gateway, degrade, prometheus, alertmanager = free_ports(7)
        ports = (fast, slow, collector, gateway, degrade, prometheus, alertmanager)
        layout = Layout(Path(tmp), *ports, seed=11)

        async def run() -> dict[str, float]:
            with Supervisor() as supervisor:
                stack = Stack(layout, supervisor, tools)
                try:
                    await stack.start(production=True, act_on=(MITIGATE,), guard=False)  # the rules alone
                    traffic = Traffic(layout.gateway_url, MODEL, rate_per_s=2.0, seed=11)
                    stop = asyncio.Event()
                    sending = asyncio.create_task(traffic.run(stop))
                    try:
                        return await _scenario(stack, traffic)
                    finally:
                        stop.set()
                        with contextlib.suppress(Exception):
                            await sending
                finally:
                    await stack.shutdown()

        figures = asyncio.run(run())
    print(f"mitigation timing: {figures}")
    assert figures["fault_to_degrade_s"] <= DEGRADE_WITHIN_S, figures
    assert figures["blip_peak_miss_ratio"] < 0.5, figures
