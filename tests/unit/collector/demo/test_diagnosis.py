"""The demo's diagnosis of its fault: started by the page, shown in the live view, kept in summary.json."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from lanewatch.alerts.spec import DEMO_SPEC
from lanewatch.collector.demo.diagnosis import FaultDiagnosis, diagnosis_context, finding_line
from lanewatch.collector.demo.events import Event
from lanewatch.collector.demo.live import Snapshot, render
from lanewatch.collector.demo.stack import Tools, commands
from lanewatch.collector.demo.summary import build_summary
from tests.unit.collector.diagnose.test_prometheus import _prometheus, _queue_bound

from .test_configs import layout
from .test_summary_and_live import PAGE

URL = "http://prom.test:9090"
FINDING = {
    "check": "queue/unsplit",
    "title": "queue-bound, cause unsplit",
    "explains": {"of": "ttft", "share": 0.97},
    "evidence": [],
}


def test_the_top_finding_in_one_line() -> None:
    done = {"lane": "slow", "window": "20s", "found": 1, "findings": [FINDING]}
    assert finding_line(done) == "slow lane: queue/unsplit: queue-bound, cause unsplit (explains 97% of TTFT)"
    assert finding_line({"lane": "slow", "window": "20s", "found": 0, "findings": []}) == (
        "slow lane: no finding over 20s"
    )
    down = {"lane": "slow", "window": "20s", "error": "cannot query"}
    assert finding_line(down) == "slow lane: no diagnosis (cannot query)"
    assert finding_line(None) is None


def test_the_live_view_prints_the_top_finding_once_there_is_one() -> None:
    line = "slow lane: queue/unsplit: queue-bound, cause unsplit (explains 97% of TTFT)"
    console = Console(width=140, record=True)
    console.print(render(Snapshot(elapsed_s=40, stage="alert firing", diagnosis=line)))
    assert f"top finding    {line}" in console.export_text()
    calm = Console(width=140, record=True)
    calm.print(render(Snapshot(elapsed_s=1, stage="warming up")))
    assert "top finding" not in calm.export_text()


def test_summary_json_holds_the_diagnosis() -> None:
    diagnosis = {"t": 1.0, "lane": "slow", "window": "20s", "found": 1, "findings": [FINDING]}
    assert build_summary([], [], {}, diagnosis=diagnosis)["diagnosis"] == diagnosis
    assert build_summary([], [], {})["diagnosis"] is None


async def test_the_page_on_the_faulted_lane_starts_one_diagnosis_over_the_fault_so_far() -> None:
    transport, asked = _prometheus(_queue_bound(kv=0.5))
    diag = FaultDiagnosis(URL, "slow", diagnosis_context(DEMO_SPEC), transport)
    injected = Event(time.time() - 70, "fault_injected", {"lane": "slow"})
    other = Event(time.time(), "alert_firing", {**PAGE, "lane": "fast"})
    diag.on_events([injected, other], [injected, other])
    await diag.finish()
    assert diag.result is None and asked == []  # not the faulted lane's page
    page = Event(time.time(), "alert_firing", PAGE)
    diag.on_events([page], [injected, other, page])
    await diag.finish()
    assert diag.result is not None and diag.result["lane"] == "slow"
    assert diag.result["window"] in ("70s", "71s")  # from the fault's start
    assert [f["check"] for f in diag.result["findings"]] == ["queue/compute"]
    assert any("[70s]" in q or "[71s]" in q for q in asked)
    n = len(asked)
    diag.on_events([page], [injected, page])  # once per run
    await diag.finish()
    assert len(asked) == n
    assert diag.line is not None and diag.line.startswith("slow lane: queue/compute: queue-bound on compute")


async def test_without_prometheus_nothing_is_diagnosed() -> None:
    diag = FaultDiagnosis(None, "slow", diagnosis_context(DEMO_SPEC))
    page = Event(time.time(), "alert_firing", PAGE)
    diag.on_events([page], [Event(time.time() - 5, "fault_injected", {}), page])
    await diag.finish()
    assert diag.result is None and diag.line is None


def test_the_controller_diagnoses_from_the_demos_prometheus_when_it_runs(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    argv = commands(lay, Tools("/usr/bin/prometheus", None))["degrade"]
    assert argv[argv.index("--prometheus") + 1] == lay.prometheus_url
    assert argv[argv.index("--slo-spec") + 1] == str(DEMO_SPEC)
    assert "--diagnose-window" in argv
    assert "--prometheus" not in commands(lay, Tools(None, None))["degrade"]
