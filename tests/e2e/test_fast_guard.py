"""The fast guard, in real time: a sustained breach moves traffic within seconds, through real
Prometheus and Alertmanager, with the production rules and the production Alertmanager timers.

The demo's stack on 127.0.0.1 (two simulated lanes, the gateway, the collector with its guard,
the controller acting on mitigation alerts only), loading alerts/generated/lanewatch-rules.yml at
deploy/prometheus's intervals and deploy/alertmanager's timers (the mitigation route:
group_wait 1s, group_interval 1s). Traffic (4 requests a second, half of them routed to the slow
lane) flows through the gateway and the collector probes both lanes directly. Each fault is the
simulator's 3 s queue delay on the slow lane: every request there misses the 2 s TTFT SLO.

The traffic carries the noise of tests/e2e/noise_phase.py throughout: half of it unstreamed, 10 %
slow uploads, 5 % early disconnects.

1. Two minutes with no fault, with bursts of client 4xx: the guard judges the streamed requests
   and fires nothing.
2. Five trials of a sustained fault: from the fault to the first slow-routed request the fast
   lane served, held to a goal counted from the moment the guard's evidence was complete (the
   lane's requests, by their records: fault_trials.evidence_after), so a loaded machine that
   sends them late moves the goal with them; then the fault clears, and the controller restores
   within its hold plus 15 s. Until each shift, the gateway's rescue gives at least 99 % of the
   streamed slow-lane requests their first token within the SLO; 30 % of the traffic opts out of
   it, and those requests, the same run without the rescue, miss.
3. A 15 s blip: at most one shift and one restore.

The figures are printed (docs/slo.md quotes them). The run takes about 6 minutes.
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
    FAULT,
    HOLD_S,
    MEDIAN_REACTION_S,
    MITIGATE,
    RATE_PER_S,
    WORST_REACTION_S,
    audit_of,
    evidence_after,
    fired_after,
    first_tokens_during,
    gateway_first_shift,
    reactions,
    rescue_counts,
    slow_degraded,
    sustained_fault,
)
from tests.e2e.noise_phase import NOISE, quiet_phase, ttft_firings

pytestmark = [pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(780)]  # timing: not beside other tests

TRIALS = 5
WARMUP_S = 15.0
SHIFT_LIMIT_S = 30.0  # a trial that has not shifted by then has failed
RESTORE_MARGIN_S = 15.0  # restore within the policy's hold plus this, from the fault's end
BLIP_S = 15.0
POLL_S = 0.1
# 4/s for two minutes, half of it streamed, and the probes: far more than this many are judged
MIN_JUDGED_QUIET = 100
RESCUE_OFF = 0.3  # the share of the traffic that opts out of the rescue: the same run without it
MAX_QUIET_RESCUES = 0.01  # rescues per request with no fault


async def _degrade_changes(stack: Stack, seconds: float) -> list[bool]:
    """The slow lane's degraded state each time it changed over `seconds`."""
    changes: list[bool] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        on = await slow_degraded(stack)
        if not changes or changes[-1] != on:
            changes.append(on)
        await asyncio.sleep(POLL_S)
    return changes


async def _scenario(stack: Stack, traffic: Traffic) -> dict[str, Any]:
    figures: dict[str, Any] = {"to_shift_s": [], "to_restore_s": [], "faults": []}
    await asyncio.sleep(WARMUP_S)
    figures["quiet"] = await quiet_phase(stack, stack.layout.gateway_url, time.time())
    for _ in range(TRIALS):
        trial = await sustained_fault(stack, gateway_first_shift(traffic), SHIFT_LIMIT_S, RESTORE_MARGIN_S)
        figures["faults"].append(trial.fault_at)
        figures["to_shift_s"].append(round(trial.to_shift_s, 2))
        figures["to_restore_s"].append(round(trial.to_restore_s, 2))
        await asyncio.sleep(3.0)

    await stack.set_fault("slow", FAULT)
    blip = asyncio.create_task(_degrade_changes(stack, BLIP_S + HOLD_S + RESTORE_MARGIN_S + 10))
    await asyncio.sleep(BLIP_S)
    await stack.clear_fault("slow")
    figures["blip_changes"] = await blip
    return figures


def test_the_guard_shifts_a_sustained_breach_within_seconds_and_ignores_noise() -> None:
    tools = Tools(require_binary("prometheus"), require_binary("prometheus-alertmanager"))
    with tempfile.TemporaryDirectory(prefix="lanewatch-guard-") as tmp:
        fast, slow, collector, gateway, degrade, prometheus, alertmanager = free_ports(7)
        ports = (fast, slow, collector, gateway, degrade, prometheus, alertmanager)
        layout = Layout(Path(tmp), *ports, seed=13)

        async def run() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            with Supervisor() as supervisor:
                stack = Stack(layout, supervisor, tools)
                try:
                    await stack.start(probe_interval_s=1.0, production=True, act_on=(MITIGATE,), guard=True)
                    traffic = Traffic(
                        layout.gateway_url,
                        MODEL,
                        rate_per_s=RATE_PER_S,
                        seed=13,
                        noise=NOISE,
                        rescue_off=RESCUE_OFF,
                    )
                    stop = asyncio.Event()
                    sending = asyncio.create_task(traffic.run(stop))
                    try:
                        figures = await _scenario(stack, traffic)
                        records = layout.records("collector")
                        figures["to_evidence_s"] = [
                            round(evidence_after(records, f) or -1.0, 2) for f in figures["faults"]
                        ]
                        before_shift = zip(figures["faults"], figures["to_shift_s"], strict=True)
                        figures["first_tokens"] = first_tokens_during(
                            traffic.timings, [(f, f + s) for f, s in before_shift]
                        )
                        figures["rescues"] = await rescue_counts(layout.gateway_url)
                        return figures, audit_of(stack)
                    finally:
                        stop.set()
                        with contextlib.suppress(Exception):
                            await sending
                finally:
                    await stack.shutdown()

        figures, audit = asyncio.run(run())
    figures["to_fired_s"] = [round(fired_after(audit, f) or -1.0, 2) for f in figures.pop("faults")]
    quiet = figures["quiet"]
    assert not quiet.fired and quiet.posts == 0, quiet  # the noise moved nothing
    assert quiet.met >= MIN_JUDGED_QUIET, quiet  # ... while the guard judged the streamed requests
    assert quiet.rescues <= MAX_QUIET_RESCUES * quiet.requests, (
        quiet
    )  # the rescue costs little when all is well
    figures["reaction_s"] = reacted = reactions(figures["to_shift_s"], figures["to_evidence_s"])
    print(f"fast guard: {figures}")
    assert statistics.median(reacted) <= MEDIAN_REACTION_S, figures
    assert max(reacted) <= WORST_REACTION_S, figures
    assert max(figures["to_restore_s"]) <= HOLD_S + RESTORE_MARGIN_S, figures
    # one shift and one restore at most
    assert figures["blip_changes"] in ([False], [False, True, False]), figures
    # Until the shift, the rescue kept the fault from the clients: against the ones that opted out
    rescued, waited = figures["first_tokens"][False], figures["first_tokens"][True]
    assert rescued.n >= 10 and rescued.share >= 0.99, figures
    assert waited.n >= 3 and waited.share <= 0.5, figures
    fired = ttft_firings(audit)
    assert fired, audit
    assert all(e["detail"]["source"] == "guard" for e in fired), fired  # the rules never got there first
