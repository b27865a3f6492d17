from __future__ import annotations

from typing import Any

from bench.report import evaluate_goals, render

KEYS = {
    "tap_added_ttft_p99_ms_64": 0.9,
    "nginx_added_ttft_p99_ms_64": -0.2,  # nginx measured as faster than direct: the limit is 1.5 × 0
    "tap_added_ttft_p50_ms_64": 0.7,
    "tap_cpu_s_per_1k_chunks_64": 0.041,
    "nginx_cpu_s_per_1k_chunks_64": 0.02,
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
    assert (goals["tap_cpu"].limit, goals["tap_cpu"].met) == (0.04, False)
    assert (goals["tap_p50_256"].limit, goals["tap_p50_256"].met) == (6.0, True)  # 2 × 0.5 + 5, inclusive
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
    notes = {"why": {"tap_cpu": ("cheap enough", "the per-request Python")}, "limits": "Two cores."}
    text = render(_results(KEYS), notes)
    row = next(line for line in text.splitlines() if "`tap_cpu_s_per_1k_chunks_64`" in line)
    assert "0.041 s" in row and "0.040 s" in row and "**not met**" in row and "the per-request Python" in row
    assert text.count("**met**") == 5 and text.count("not measured") == 1
    assert "AMD EPYC, 2 cores" in text and "[0.1, 0.2, 0.3]" in text and "nginx 1.22.1" in text
    assert "## What limits the figures\n\nTwo cores." in text
    assert "## Gateway tap overhead" not in text  # no tap details in this run
