"""The diagnosis bench part: one real `lanewatch diagnose` run, its figures and its results.md lines."""

from __future__ import annotations

from pathlib import Path

from bench.diagnose_cost import flat_keys, run_diagnose_cost
from bench.report import evaluate_goals, render
from tests.unit.bench.test_report import _results


def test_a_small_file_is_diagnosed_and_its_figures_reported(tmp_path: Path) -> None:
    r = run_diagnose_cost(600, tmp_path)
    assert r["records"] == 600 and r["gaps"] > 600 and r["file_mb"] > 0
    assert (
        r["cpu_s"] > 0 and r["wall_s"] > 0 and r["decode_cpu_s"] > 0 and 0 < r["start_cpu_s"] < r["cpu_s"] * 2
    )
    assert 20 < r["rss_mb"] < 1000  # the diagnosis process alone, not this one
    assert r["found"] >= 1 and r["top"] == "queue/unsplit"  # the slow lane's queue
    keys = flat_keys(r)
    goal = next(g for g in evaluate_goals(keys) if g.id == "diagnose_records")
    assert goal.measured == round(600 / r["cpu_s"]) and (goal.limit, goal.at_least) == (40_000.0, True)
    assert goal.measured is not None and goal.met is (goal.measured >= 40_000)
    results = _results(keys) | {"details": {"diagnose": r}}
    text = render(results, {})
    assert "## Diagnosis" in text and f"**{r['cpu_s']} CPU s**" in text
