"""`lanewatch demo --router envoy` as a user runs it, a real process with real Envoy, Prometheus
and Alertmanager on 127.0.0.1: the fault pages, the controller's envoy adapter rewrites Envoy's
route file, Envoy moves the slow lane's traffic to the fast lane, and the restore moves it back.
The records come from Envoy's access log (source `envoy`, lane = the upstream cluster that
served it), so they show where Envoy sent each request. The run takes about two minutes here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lanewatch.collector.demo.supervisor import lanewatch_command
from tests.conftest import require_binary

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]

RUN_LIMIT_S = 420.0  # the process's own bound; the demo ends 15 s after the restore (~2 min here)
MARGIN_S = 3.0  # the demo sees Envoy's routes by polling: keep requests near a change out
SLOW_CLASSES = {"summary", "story"}  # the classes the demo's routes send to the slow lane


def _first(events: list[dict[str, Any]], kind: str) -> float:
    times = [e["t"] for e in events if e["kind"] == kind and e.get("lane") == "slow"]
    assert times, f"no {kind} of the slow lane in {events}"
    return float(times[0])


def test_demo_through_envoy_tells_the_whole_story_and_envoy_moves_the_traffic(tmp_path: Path) -> None:
    for name in ("prometheus", "prometheus-alertmanager", "envoy"):
        require_binary(name)
    out = tmp_path / "out"
    argv = [
        *lanewatch_command(), "demo", "--router", "envoy", "--no-live", "--out", str(out),
        "--rate", "2", "--warmup", "15", "--seed", "7", "--duration", "300",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_LIMIT_S, check=False)
    log = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, log

    summary = json.loads((out / "summary.json").read_text())
    assert summary["router"] == "envoy" and summary["error"] is None
    assert summary["story_complete"] is True, log
    events = summary["events"]
    injected, applied = _first(events, "fault_injected"), _first(events, "degrade_applied")
    restored = _first(events, "degrade_restored")
    assert next(e for e in events if e["kind"] == "degrade_applied")["shift_to"] == "fast"

    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {r["source"] for r in records} == {"probe", "envoy"}  # no gateway in the path
    envoy = [r for r in records if r["source"] == "envoy" and r["status"] == 200]
    slow_routed = [r for r in envoy if r["request_class"] in SLOW_CLASSES]
    before = [r for r in slow_routed if r["started_at"] < injected]
    during = [r for r in slow_routed if applied + MARGIN_S < r["started_at"] < restored - MARGIN_S]
    after = [r for r in slow_routed if r["started_at"] > restored + MARGIN_S]
    assert before and during and after, (len(before), len(during), len(after))
    # Envoy's upstream cluster: the slow lane's requests went to the fast lane while shifted, and back.
    assert all(r["lane"] == "fast" for r in during), [r["lane"] for r in during]
    assert all(r["lane"] == "slow" for r in before + after)
    assert all(r["model"] == "lanewatch-demo-big" for r in envoy)  # both lanes answer one name
    # The access-log records join the simulators' spans: queue, prefill, decode from the engine.
    joined = [r for r in envoy if r["phases_source"] == "span"]
    assert len(joined) >= 0.9 * len(envoy), (len(joined), len(envoy))
    assert summary["lanes"]["fast"]["by_source"].get("envoy") and summary["lanes"]["slow"]["by_source"].get(
        "envoy"
    )
