"""`lanewatch demo --router R` run as a user runs it, for the tests of the routers lanewatch does
not run itself (Envoy, LiteLLM): the process, its summary's story, and the slow-routed records
before, during and after the shift."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanewatch.collector.demo.supervisor import lanewatch_command
from tests.e2e.fault_trials import SLOW_CLASSES

__all__ = ["RouterDemo", "run_router_demo"]

RUN_LIMIT_S = 420.0  # the process's own bound; the demo ends 15 s after the restore (~2-2.5 min here)
MARGIN_S = 3.0  # the demo sees the router's state by polling: keep requests near a change out


def _first(events: list[dict[str, Any]], kind: str) -> float:
    times = [e["t"] for e in events if e["kind"] == kind and e.get("lane") == "slow"]
    assert times, f"no {kind} of the slow lane in {events}"
    return float(times[0])


@dataclass(frozen=True)
class RouterDemo:
    """A finished demo run: its summary, its records, and its output for failure messages."""

    summary: dict[str, Any]
    records: list[dict[str, Any]]
    log: str

    def slow_routed(self, records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], ...]:
        """`records` of the slow lane's classes that started before the fault, while the shift held
        (away from its edges), and after the restore."""
        events = self.summary["events"]
        injected, applied = _first(events, "fault_injected"), _first(events, "degrade_applied")
        restored = _first(events, "degrade_restored")
        slow = [r for r in records if r["request_class"] in SLOW_CLASSES]
        return (
            [r for r in slow if r["started_at"] < injected],
            [r for r in slow if applied + MARGIN_S < r["started_at"] < restored - MARGIN_S],
            [r for r in slow if r["started_at"] > restored + MARGIN_S],
        )


def run_router_demo(router: str, out: Path) -> RouterDemo:
    """Run the demo through `router` to its end; it must exit 0 with the whole story told and the
    slow lane shifted to the fast one."""
    argv = [
        *lanewatch_command(), "demo", "--router", router, "--no-live", "--out", str(out),
        "--rate", "2", "--warmup", "15", "--seed", "7", "--duration", "300",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_LIMIT_S, check=False)
    log = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["router"] == router and summary["error"] is None
    assert summary["story_complete"] is True, log
    applied = next(e for e in summary["events"] if e["kind"] == "degrade_applied")
    assert applied["shift_to"] == "fast", applied
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return RouterDemo(summary, records, log)
