"""The Prometheus diagnosis bench part: backfilled data a real Prometheus serves, one timed diagnosis."""

from __future__ import annotations

import itertools
from pathlib import Path

from bench.diagnose_prometheus import flat_keys, openmetrics, recorded_series, run_diagnose_prometheus
from bench.report import evaluate_goals, render
from lanewatch.exporters import names
from tests.unit.bench.test_report import _results


def test_the_openmetrics_text_holds_each_family_once_in_time_order() -> None:
    series = recorded_series(1_800_000_000)
    text = openmetrics(series)
    assert text.endswith("# EOF\n")
    types = [line for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(types) == len(set(types)) == len(series)
    assert f"{names.TTFT_SECONDS}_bucket" in series and names.VLLM_KV_CACHE_USAGE_PERC in series
    for by_labels in series.values():
        for points in by_labels.values():
            times = [at for at, _ in points]
            assert times == sorted(times) and times[-1] == 1_800_000_000
    requests = series[names.REQUESTS_TOTAL]
    assert all(
        later >= earlier for pts in requests.values() for (_, earlier), (_, later) in itertools.pairwise(pts)
    )


def test_a_window_for_two_lanes_is_diagnosed_and_its_figures_reported(tmp_path: Path) -> None:
    r = run_diagnose_prometheus(tmp_path)
    assert r["found"] >= 1 and r["top"] == "slow: queue/kv-memory"  # the slow lane's KV-bound queue
    assert r["lanewatch_cpu_s"] > 0 and r["prometheus_cpu_s"] >= 0 and r["series"] > 100
    keys = flat_keys(r)
    goal = next(g for g in evaluate_goals(keys) if g.id == "diagnose_prometheus")
    assert goal.measured == r["cpu_s"] and goal.limit == 3.0
    text = render(_results(keys) | {"details": {"diagnoseprom": r}}, {})
    assert "## Diagnosis" in text and f"**{r['cpu_s']} CPU s**" in text and "backfilled" in text
