"""`lanewatch demo --router litellm` as a user runs it, a real process with a real LiteLLM proxy
(`make litellm`'s venv), Prometheus and Alertmanager on 127.0.0.1: the fault pages, the
controller's litellm adapter puts the shift into lanewatch's handler in the proxy, whose pre-call
hook sends the slow lane's model group to the fast lane's, and the restore moves it back. The
records come from the handler (source `litellm`, lane = the model group LiteLLM routed to), so they
show where LiteLLM sent each request. The run takes about two and a half minutes here.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lanewatch.collector.demo.configs import MODELS
from lanewatch.collector.demo.supervisor import lanewatch_command
from tests.conftest import require_binary
from tests.litellm import litellm_python

# serial: beside two other test workers on two cores, the LiteLLM proxy (Python, CPU-bound per chunk)
# stalled long enough to put the fast lane past its 0.5 s TTFT SLO, and the guard degraded it
pytestmark = [pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(480)]

RUN_LIMIT_S = 420.0  # the process's own bound; the demo ends 15 s after the restore (~2.5 min here)
MARGIN_S = 3.0  # the demo sees the handler's state by polling: keep requests near a change out
SLOW_CLASSES = {"summary", "story"}  # the classes the demo's traffic asks the slow lane's model group for


def _first(events: list[dict[str, Any]], kind: str) -> float:
    times = [e["t"] for e in events if e["kind"] == kind and e.get("lane") == "slow"]
    assert times, f"no {kind} of the slow lane in {events}"
    return float(times[0])


def test_demo_through_litellm_tells_the_whole_story_and_the_handler_moves_the_traffic(tmp_path: Path) -> None:
    for name in ("prometheus", "prometheus-alertmanager"):
        require_binary(name)
    litellm_python()
    out = tmp_path / "out"
    argv = [
        *lanewatch_command(), "demo", "--router", "litellm", "--no-live", "--out", str(out),
        "--rate", "2", "--warmup", "15", "--seed", "7", "--duration", "300",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_LIMIT_S, check=False)
    log = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, log

    summary = json.loads((out / "summary.json").read_text())
    assert summary["router"] == "litellm" and summary["error"] is None
    assert summary["story_complete"] is True, log
    events = summary["events"]
    injected, applied = _first(events, "fault_injected"), _first(events, "degrade_applied")
    restored = _first(events, "degrade_restored")
    assert next(e for e in events if e["kind"] == "degrade_applied")["shift_to"] == "fast"

    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {r["source"] for r in records} == {"probe", "litellm"}  # no gateway in the path
    litellm = [r for r in records if r["source"] == "litellm"]
    # Each request the traffic sent is one record from the handler, none twice (the demo waits for
    # the handler's last batch before it stops the proxy).
    traffic = summary["traffic"]
    assert traffic["errors"] == {} and traffic["skipped"] == 0, traffic
    assert len(litellm) == traffic["sent"], (len(litellm), traffic["sent"])
    ids = Counter(r["request_id"] for r in litellm)
    assert len(ids) == len(litellm), ids.most_common(3)
    ok = [r for r in litellm if r["status"] == 200]
    assert len(ok) == len(litellm), Counter((r["status"], r["error"]) for r in litellm)
    assert all(r["ttft_s"] is not None and 0 < r["ttft_s"] <= r["e2e_s"] for r in ok)
    # The model group LiteLLM sent each request to is its lane's, and its deployment the lane.
    assert all(r["model"] == MODELS[r["lane"]] and r["attrs"]["deployment"] == r["lane"] for r in ok)

    slow_asked = [r for r in ok if r["request_class"] in SLOW_CLASSES]
    before = [r for r in slow_asked if r["started_at"] < injected]
    during = [r for r in slow_asked if applied + MARGIN_S < r["started_at"] < restored - MARGIN_S]
    after = [r for r in slow_asked if r["started_at"] > restored + MARGIN_S]
    assert before and during and after, (len(before), len(during), len(after))
    # The handler's shift: the slow lane's requests went to the fast lane's model group, and back.
    assert all(r["lane"] == "fast" for r in during), [r["lane"] for r in during]
    assert all(r["lane"] == "slow" for r in before + after), [r["lane"] for r in before + after]
    lanes = summary["lanes"]
    assert lanes["fast"]["by_source"].get("litellm") and lanes["slow"]["by_source"].get("litellm")
