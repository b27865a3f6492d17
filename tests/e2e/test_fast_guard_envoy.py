"""The fast guard behind Envoy, in real time: Envoy's periodic access log tells the collector of
requests under way, the guard fires, and the controller's envoy adapter moves the slow lane's
traffic within seconds.

The demo's stack with `router envoy` on 127.0.0.1: a real Envoy 1.40 from the shipped bootstrap
and access logger (each stream under way logged every 0.2 s), whose route file the controller's
envoy adapter writes; two simulated lanes; the collector with its guard judging Envoy's entries;
real Prometheus and Alertmanager with the production rules and timers; the controller acting on
mitigation alerts only. Traffic: 4 requests/s through Envoy (half of them routed to the slow
lane), with the noise of tests/e2e/noise_phase.py (half of it unstreamed, 10 % slow uploads, 5 %
early disconnects), and the collector's probes every second. First, two minutes with no fault and
bursts of client 4xx fire nothing. Each fault is the simulator's 3 s queue delay on
the slow lane, over its 2 s TTFT SLO.

Envoy sends no `x-lanewatch-lane`, so where a request went is read from its record: the access
log's end entry names the cluster that served it (`lane`) and the request's class, and its
`started_at` is when Envoy took it. The figure is the fault to the start of the first request of
a slow-routed class that the fast lane served, held to a goal counted from the moment the
guard's evidence was complete, as through the gateway. Five trials: the shift
waits for the next slow-routed arrival after the apply, and with the seeded traffic one trial
can meet a run of fast-routed arrivals (2.7 s once). The figures are printed (docs/slo.md quotes
them). The run takes about 5 minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from lanewatch.collector.demo import Layout, Stack, Supervisor, Tools, free_ports
from lanewatch.collector.demo.configs import MODEL
from lanewatch.collector.demo.traffic import Traffic
from tests.conftest import require_binary
from tests.e2e.fault_trials import (
    HOLD_S,
    MEDIAN_REACTION_S,
    MITIGATE,
    RATE_PER_S,
    WORST_REACTION_S,
    Trial,
    audit_of,
    envoy_first_shift,
    evidence_after,
    fired_after,
    reactions,
    sustained_fault,
)
from tests.e2e.noise_phase import NOISE, PROBE_OVERLAP, QuietFigures, quiet_phase, ttft_firings

pytestmark = [pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(720)]  # timing: not beside other tests

TRIALS = 5
WARMUP_S = 15.0
SHIFT_LIMIT_S = 30.0
RESTORE_MARGIN_S = 15.0
MIN_JUDGED_QUIET = 100  # 4/s for two minutes, half of it streamed, and the probes: far more


def test_behind_envoy_the_guard_shifts_a_sustained_breach_within_seconds() -> None:
    tools = Tools.find()
    for name in ("prometheus", "prometheus-alertmanager"):
        require_binary(name)
    if tools.envoy is None:
        require_binary("envoy")
    with tempfile.TemporaryDirectory(prefix="lanewatch-guard-envoy-") as tmp:
        fast, slow, collector, gateway, degrade, prometheus, alertmanager, *envoy = free_ports(9)
        layout = Layout(
            Path(tmp), fast, slow, collector, gateway, degrade, prometheus, alertmanager, seed=17,
            router="envoy", envoy_port=envoy[0], envoy_admin_port=envoy[1],
        )  # fmt: skip

        async def run() -> tuple[QuietFigures, list[Trial], list[float], list[dict[str, Any]]]:
            with Supervisor() as supervisor:
                stack = Stack(layout, supervisor, tools)
                try:
                    await stack.start(
                        probe_interval_s=1.0,
                        production=True,
                        act_on=(MITIGATE,),
                        guard=True,
                        probe_overlap=PROBE_OVERLAP,
                    )
                    traffic = Traffic(layout.traffic_url, MODEL, rate_per_s=RATE_PER_S, seed=17, noise=NOISE)
                    stop = asyncio.Event()
                    sending = asyncio.create_task(traffic.run(stop))
                    try:
                        await asyncio.sleep(WARMUP_S)
                        quiet = await quiet_phase(stack, layout.traffic_url, time.time())
                        first_shift = envoy_first_shift(layout.records("collector"))
                        trials = []
                        for _ in range(TRIALS):
                            trials.append(
                                await sustained_fault(stack, first_shift, SHIFT_LIMIT_S, RESTORE_MARGIN_S)
                            )
                            await asyncio.sleep(3.0)
                        records = layout.records("collector")
                        evidence = [evidence_after(records, t.fault_at) or -1.0 for t in trials]
                        return quiet, trials, evidence, audit_of(stack)
                    finally:
                        stop.set()
                        with contextlib.suppress(Exception):
                            await sending
                finally:
                    await stack.shutdown()

        quiet, trials, evidence, audit = asyncio.run(run())
    figures = {
        "to_shift_s": [round(t.to_shift_s, 2) for t in trials],
        "to_fired_s": [round(fired_after(audit, t.fault_at) or -1.0, 2) for t in trials],
        "to_evidence_s": [round(e, 2) for e in evidence],
        "to_restore_s": [round(t.to_restore_s, 2) for t in trials],
    }
    figures["reaction_s"] = reacted = reactions(figures["to_shift_s"], figures["to_evidence_s"])
    print(f"fast guard behind envoy: {figures}, quiet: {quiet}")
    assert not quiet.fired and quiet.posts == 0, quiet  # the noise moved nothing
    assert quiet.met >= MIN_JUDGED_QUIET, quiet  # ... while the guard judged the streamed requests
    assert statistics.median(reacted) <= MEDIAN_REACTION_S, figures
    assert max(reacted) <= WORST_REACTION_S, figures
    assert max(figures["to_restore_s"]) <= HOLD_S + RESTORE_MARGIN_S, figures
    fired = ttft_firings(audit)
    assert fired and all(e["detail"]["source"] == "guard" for e in fired), fired
