"""The closed loop with real Prometheus and Alertmanager on 127.0.0.1, through the demo's own code.

A queue-delay fault in the slow lane must fire the TTFT burn page, the controller must shift
the slow lane's traffic to the fast lane (the gateway's x-lanewatch-lane says so), and once
the fault clears the alert must resolve and the traffic return, each within a bounded time.
Before the stack stops, every dashboard panel query must return data from that Prometheus.
Every wait is on a condition with a generous deadline (a loaded 2-core CI machine); the run
takes about 110 s here.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from pathlib import Path

import pytest
from rich.console import Console

from lanewatch.collector.demo import DemoResult, Options, Plan, run_demo
from lanewatch.collector.demo.events import story_complete
from lanewatch.collector.diagnose.thresholds import Thresholds
from tests.conftest import require_binary
from tests.e2e.story import PanelCheck, assert_shifted_and_back, check_outputs, expected_empty, loop_gaps

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

# Deadlines, generous for a loaded CI machine; the figures measured here are in docs/demo.md.
FAULT_TO_ALERT_S = 60.0  # ~11 s here: the 15 s / 1 m windows, `for: 5s`, 1 s evaluation
ALERT_TO_DEGRADE_S = 20.0  # ~1 s: Alertmanager's group_wait 1 s, the controller, the gateway
CLEAR_TO_RESOLVE_S = 90.0  # ~34 s: the 30 s window must forget the slow requests
RESOLVE_TO_RESTORE_S = 30.0  # ~6 s: group_interval 2 s, recovery_stable_s 5 s
RUN_LIMIT_S = 300.0
MARGIN_S = 3.0

EXPECTED_ALERTS = {("LanewatchTTFTBurnRate", "slow"), ("LanewatchTTFTP99High", "slow")}


def test_fault_pages_shifts_and_recovers_and_every_panel_has_data(tmp_path: Path) -> None:
    require_binary("prometheus")
    require_binary("prometheus-alertmanager")
    panels = PanelCheck(time.time())

    plan = Plan(duration_s=RUN_LIMIT_S - 60, warmup_s=15.0, show_shift_s=5.0, tail_s=15.0)
    opts = Options(plan, out=tmp_path / "out", live=False, seed=7, rate_per_s=2.0)
    console = Console(file=io.StringIO(), width=200)
    result: DemoResult = asyncio.run(run_demo(opts, console, asyncio.Event(), before_stop=panels))
    log = console.file.getvalue()  # type: ignore[attr-defined]
    assert result.error is None, f"{result.error}\n{log}"
    assert not result.interrupted

    events = result.events
    assert story_complete(events), f"the six events did not happen in order:\n{log}"
    to_alert, to_degrade, to_resolve, to_restore = loop_gaps(events)
    assert 0 < to_alert < FAULT_TO_ALERT_S
    assert 0 < to_degrade < ALERT_TO_DEGRADE_S
    assert 0 < to_resolve < CLEAR_TO_RESOLVE_S
    assert 0 < to_restore < RESOLVE_TO_RESTORE_S
    print(f"loop: {result.timings}")

    # The gateway shifted: responses routed to the slow lane came from the fast lane while degraded,
    # and from the slow lane again after.
    assert_shifted_and_back(result, events, MARGIN_S)

    # The fault's alerts and nothing else: no target down, no TPOT, no fast-lane alert the shift
    # caused. The fast lane's P99 alert reads a 15 s window, so one request past 0.5 s holds it:
    # that is the truth about the machine, not the loop, when the request's time went outside the
    # lane's queue (a 2-core machine running other tests stalled one 0.77 s, 0.12 s of it queued).
    unexpected = panels.fired - EXPECTED_ALERTS - stalls_outside_the_queue(tmp_path / "out", "fast", 0.5)
    assert not unexpected, f"unexpected alerts: {unexpected}"
    panels.assert_every_panel_has_data(expected_empty())

    check_outputs(tmp_path / "out", result)
    assert_the_queue_is_named(tmp_path / "out", panels, log)


QUEUE_CHECKS = ("queue/unsplit", "queue/compute", "queue/kv-memory")


def stalls_outside_the_queue(out: Path, lane: str, limit_s: float) -> set[tuple[str, str]]:
    """{("LanewatchTTFTP99High", lane)} when the lane's records hold a first token past `limit_s`
    and every one of them waited less than half of it in the engine's queue (the machine was slow,
    not the lane overloaded); else nothing."""
    slow = [
        r
        for line in (out / "records.jsonl").read_text().splitlines()
        if (r := json.loads(line))["lane"] == lane and (r.get("ttft_s") or 0.0) > limit_s
    ]
    if slow and all((r.get("queue_s") or 0.0) < r["ttft_s"] / 2 for r in slow):
        seen = [(r["ttft_s"], r.get("queue_s")) for r in slow]
        print(f"{lane}-lane requests slow outside the queue (ttft_s, queue_s): {seen}")
        return {("LanewatchTTFTP99High", lane)}
    return set()


def assert_the_queue_is_named(out: Path, panels: PanelCheck, log: str) -> None:
    """Diagnosed from the demo's Prometheus during the fault, as `lanewatch diagnose --prometheus`
    does, the slow lane's queue is the top finding: in summary.json, in the live view's line, and
    in the controller's audit entry for the shift."""
    diagnosis = json.loads((out / "summary.json").read_text(encoding="utf-8"))["diagnosis"]
    assert diagnosis is not None and "error" not in diagnosis, diagnosis
    assert diagnosis["findings"], diagnosis
    top = diagnosis["findings"][0]
    assert diagnosis["lane"] == "slow" and top["check"] in QUEUE_CHECKS, diagnosis
    # The queue explains the share of TTFT that makes a lane queue-bound. Not all of it: the gateway
    # rescues the late requests, and a rescued request's wait counts for the lane's TTFT while its
    # late attempt, closed before vLLM scheduled it, has no span and so no queue time (0.47 of
    # TTFT here, against over 0.5 before the rescue).
    share = top["explains"]["share"]
    assert top["explains"]["of"] == "ttft" and share >= Thresholds().queue_share, diagnosis
    assert f"top finding: slow lane: {top['check']}" in log
    entries = [e for e in panels.audit if e["event"] == "diagnosis" and e["lane"] == "slow"]
    assert entries, f"no diagnosis in the audit log: {panels.audit}"
    # The guard shifts seconds into the fault, before Prometheus holds enough of it: the controller's
    # first look may find nothing, and its second look, 15 s on, names the queue.
    found = [e["detail"] for e in entries if e["detail"].get("findings")]
    assert found, entries
    first = found[0]
    assert "shift" in first["actions"] and first["findings"], entries
    assert first["findings"][0]["check"] in QUEUE_CHECKS, first
    print(f"diagnosis during the fault: {top}; in the audit: {first['findings'][0]['check']}")
