from __future__ import annotations

from typing import Any

from bench.report import evaluate_goals, render

KEYS = {
    "tap_added_ttft_p99_ms_64": 0.9,
    "nginx_added_ttft_p99_ms_64": -0.2,  # nginx measured as faster than direct: the limit is 1.5 × 0
    "tap_added_ttft_p50_ms_64": 0.7,
    "tap_cpu_s_per_1k_chunks_64": 0.041,
    "nginx_cpu_s_per_1k_chunks_64": 0.02,
    "envoy_cpu_s_per_1k_chunks_64": 0.026,
    "tap_added_ttft_p50_ms_256": 6.0,
    "nginx_added_ttft_p50_ms_256": 0.5,
    "probe_ttft_error_p99_ms": 1.2,
    "tap_added_ttft_p99_ms_64_pinned": 0.6,
    "nginx_added_ttft_p99_ms_64_pinned": 0.2,
}


def test_goals_compare_each_figure_with_its_limit() -> None:
    goals = {g.id: g for g in evaluate_goals(KEYS)}
    assert (goals["tap_p99_abs"].limit, goals["tap_p99_abs"].met) == (1.0, True)
    assert (goals["tap_p99_vs_nginx"].limit, goals["tap_p99_vs_nginx"].met) == (0.0, False)
    assert goals["tap_p50"].met is True
    assert (goals["tap_cpu_vs_envoy"].limit, goals["tap_cpu_vs_envoy"].met) == (0.039, False)  # 1.5 × Envoy's
    # nginx's CPU and its figures at 256 streams are context: no goal takes them as its limit
    assert not [g for g in goals.values() if g.key.endswith("_256")]
    assert goals["probe_p99"].met is True
    assert (goals["tap_p99_pinned"].measured, goals["tap_p99_pinned"].met) == (0.6, True)
    assert goals["tap_p99_vs_nginx_pinned"].limit == 0.3 and goals["tap_p99_vs_nginx_pinned"].met is False
    assert (goals["collector_rss"].measured, goals["collector_rss"].met) == (None, None)  # not in this run


def _results(goals_keys: dict[str, Any]) -> dict[str, Any]:
    from dataclasses import asdict

    return {
        "date": "2026-11-29T10:00:00+00:00",
        "duration_s": 1.0,
        "machine": {
            "cpu_model": "AMD EPYC",
            "cores": 2,
            "memory_gib": 23.5,
            "kernel": "6",
            "python": "3.11.7",
        },
        "tools": {"nginx": "1.22.1"},
        "load_avg_start": [0.1, 0.2, 0.3],
        "load_avg_end": [0.4, 0.5, 0.6],
        **goals_keys,
        "goals": [asdict(g) for g in evaluate_goals(goals_keys)],
        "details": {},
    }


def test_render_states_every_goal_with_its_verdict_and_why() -> None:
    notes = {"why": {"tap_cpu_vs_envoy": ("cheap enough", "the per-request Python")}, "limits": "Two cores."}
    text = render(_results(KEYS), notes)
    row = next(line for line in text.splitlines() if "`tap_cpu_s_per_1k_chunks_64`" in line)
    assert "0.041 s" in row and "0.039 s" in row and "**not met**" in row and "the per-request Python" in row
    # the scale, peer and diagnosis goals too
    assert text.count("**met**") == 4 and text.count("not measured") == 14
    assert "AMD EPYC, 2 cores" in text and "[0.1, 0.2, 0.3]" in text and "nginx 1.22.1" in text
    assert "## What limits the figures\n\nTwo cores." in text
    assert "## Gateway tap overhead" not in text  # no tap details in this run


SCALE = {
    "probe_cpu_ms_per_probe": 3.0,
    "blackbox_cpu_ms_per_probe": 3.2,
    "scrape_parse_ms_p50": 1.2,
    "ingest_records_per_core_s": 12_000,
    "fleet_1000_cpu_cores": 0.6,
    "fleet_1000_rss_mb": 310.0,
    "fleet_1000_start_delay_p99_ms": 100.0,
}


def test_scale_goals_take_blackbox_as_the_limit_and_ingest_as_a_floor() -> None:
    goals = {g.id: g for g in evaluate_goals(SCALE)}
    assert (goals["probe_cost"].limit, goals["probe_cost"].met) == (3.2, True)
    assert goals["scrape_parse"].met is False
    assert (goals["ingest"].limit, goals["ingest"].met) == (10_000.0, True)
    assert goals["fleet_cpu"].met is True and goals["fleet_rss"].met is False
    assert goals["fleet_delay"].met is True  # the limit is inclusive
    low = {g.id: g for g in evaluate_goals({**SCALE, "ingest_records_per_core_s": 9_999})}
    assert low["ingest"].met is False


def test_scale_sections_render_their_tables() -> None:
    results = _results(SCALE)
    results["details"] = {
        "probecost": {
            "lanewatch": {"probes": 100, "errors": 0, "window_s": 10.0, "cpu_s": 0.3, "cpu_ms_per_probe": 3.0,
                          "user_ms_per_probe": 2.5, "rss_mb": 70.0},
            "blackbox": None,
        },
        "fleet": {"probe_interval_s": 10.0, "scrape_interval_s": 15.0, "concurrency": 64, "rows": [
            {"targets": 1000, "probes_per_s": 100.0, "probe_errors": 0, "targets_up": 1000, "cpu_cores": 0.6,
             "rss_mb": 310.0, "rss_peak_mb": 320.0, "start_delay_p50_ms": 2.0, "start_delay_p99_ms": 100.0,
             "metrics_page_lines": 5000, "metrics_answer_s": 0.5, "metrics_render_cpu_s": 0.4},
        ]},
    }  # fmt: skip
    text = render(results, {"why": {}})
    assert "## Probe cost against blackbox_exporter" in text
    assert "| blackbox_exporter | not installed |" in text
    assert "| 1,000 | 100.0 (0) | 1000 | 0.6 | 0.600 | — | — | 310.0 (320.0) | 2.00 / 100.00 |" in text
    assert "## Ingest" not in text


def test_rerender_derives_keys_from_the_stored_details_and_states_the_goals_afresh() -> None:
    from bench.__main__ import rerender

    stored = _results({"diagnose_records_cpu_s": 2.0, "diagnose_records": 100_000})
    stored["goals"] = [{"id": "an old goal"}]
    stored["details"] = {"diagnose": {"records": 100_000, "cpu_s": 2.0}}
    again = rerender(stored)
    assert again["diagnose_records_per_cpu_s"] == 50_000  # derived, not measured
    goal = next(g for g in again["goals"] if g["id"] == "diagnose_records")
    assert (goal["measured"], goal["limit"], goal["met"]) == (50_000, 40_000.0, True)
    assert "an old goal" not in {g["id"] for g in again["goals"]}
    assert {k: v for k, v in again.items() if k != "goals"} == {
        **{k: v for k, v in stored.items() if k != "goals"},
        "diagnose_records_per_cpu_s": 50_000,
    }


def test_the_committed_results_state_the_goals_as_the_code_does() -> None:
    import json

    from bench.__main__ import rerender
    from tests.layout import ROOT

    committed = json.loads((ROOT / "bench" / "results.json").read_text())
    stale = "stale: run `python -m bench --render` (measures nothing) and commit bench/results.*"
    assert rerender(committed) == committed, f"bench/results.json's goals are {stale}"
    assert (ROOT / "bench" / "results.md").read_text() == render(committed), f"bench/results.md is {stale}"


def _routers(**extra: object) -> dict[str, object]:
    row = {"p50": 0.05, "min": 0.04, "max": 0.2}
    return {
        "trials": 3,
        "routers": {
            "gateway": {k: row for k in ("shift_apply", "shift_served", "restore_apply", "restore_served")},
            "envoy": {"skipped": "FileNotFoundError: envoy"},
        },
        **extra,
    }


def test_the_routers_section_shows_each_router_or_why_it_did_not_run() -> None:
    results = _results({})
    results["details"] = {"routers": _routers(date="D", duration_s=1, load_avg_start=[1], load_avg_end=[2])}
    text = render(results, {"why": {}})
    assert "## A degrade applied, router by router" in text
    assert "| gateway | 50.0 / 200.0 ms | 50.0 / 200.0 ms | 50.0 / 200.0 ms | 50.0 / 200.0 ms |" in text
    assert "| envoy | not run: FileNotFoundError: envoy |" in text
    assert "Measured D (1 s), load average (1, 5, 15 min) [1] at its start and [2] at its end." in text


def test_fast_loop_keys_and_table_take_the_median_of_each_scenario() -> None:
    from bench.fast_loop import flat_keys

    scenario = {"rate_per_s": 4.0, "probe_interval_s": 1.0, "to_fired_s": [2.5, 3.5, 3.0]}
    d = {
        "trials": 3,
        "fault": {"queue_delay_s": 3.0},
        "hold_s": 15.0,
        "scenarios": {
            "guard": {**scenario, "to_shift_s": [3.0, 5.0, 4.0], "to_restore_s": [15.0, 16.5, 15.5],
                      "collector_cpu_percent": 4.25, "fired_by": ["guard"]},
            "probes-0.5s": {**scenario, "rate_per_s": 0.0, "probe_interval_s": 0.5, "to_shift_s": [],
                            "to_restore_s": [14.0], "collector_cpu_percent": 3.0, "fired_by": ["guard"]},
            "envoy": {"skipped": "no envoy binary"},
        },
    }  # fmt: skip
    keys = flat_keys(d)
    assert keys["fast_loop_guard_to_shift_s_p50"] == 4.0 and keys["fast_loop_guard_to_shift_s_max"] == 5.0
    assert keys["fast_loop_probes_05s_to_fired_s_p50"] == 3.0
    assert not any("envoy" in k for k in keys) and "fast_loop_probes_05s_to_shift_s_p50" not in keys
    results = _results({})
    results["details"] = {"fastloop": d}
    text = render(results, {"why": {}})
    assert "## The fast loop beside the rules" in text
    assert (
        "| 4 req/s, probes every 1 s | 4.00 (3.00, 5.00, 4.00) | 3.00 (2.50, 3.50, 3.00) | 15.0–16.5 s |"
        in text
    )
    assert "| none, probes every 0.5 s | — |" in text
    assert "not run: no envoy binary" in text
