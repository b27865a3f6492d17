"""The bench's LiteLLM part: the proxy alone and with lanewatch's handler, the handler's cost taken
round by round, its keys and table, its peer path's config, and merging one part into a stored run."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.__main__ import merge_parts, rerender
from bench.litellm_handler import flat_keys, handler_cost
from bench.litellm_proxy import handler_settings
from bench.peer_paths import PEERS, SHIPPING, STAMPLESS
from bench.report import evaluate_goals, render
from lanewatch.integrations.litellm.settings import settings_from


def _row(p50s: list[float], p99s: list[float], requests: int = 100) -> dict[str, Any]:
    rounds = [{"ttft_p50_ms": a, "ttft_p99_ms": b} for a, b in zip(p50s, p99s, strict=True)]
    return {
        "requests": requests, "errors": 0, "chunks_per_s": 10.0, "ttft_p50_ms": p50s[0],
        "ttft_p99_ms": p99s[0], "added_ttft_p50_ms": p50s[0] - 50, "added_ttft_p99_ms": p99s[0] - 51,
        "proxy_cpu_s_per_1k_chunks": 1.1, "proxy_user_cpu_s_per_1k_chunks": 1.0, "rounds": rounds,
    }  # fmt: skip


LEVEL = {
    "direct": _row([50.0, 50.0, 50.0], [51.0, 51.0, 51.0]),
    "litellm": _row([60.0, 70.0, 62.0], [80.0, 90.0, 85.0]),
    "litellm-lanewatch": _row([61.0, 90.0, 62.5], [81.0, 86.0, 95.0], requests=98),
}
PART = {
    "date": "2026-12-05T08:40:00+00:00", "duration_s": 300.0, "load_avg_start": [1.5, 1.2, 1.0],
    "load_avg_end": [1.7, 1.3, 1.1], "rounds": 3, "seconds": 3.0, "levels": {"4": LEVEL},
    "cost": {"4": handler_cost(LEVEL)}, "shipped": {"litellm-lanewatch": 120}, "unavailable": {},
}  # fmt: skip


def test_the_handlers_cost_is_the_median_of_its_rows_difference_round_by_round() -> None:
    cost = handler_cost(LEVEL)
    # rounds: +1, +20, +0.5 -> median +1 (one disturbed round moves it little); p99: +1, -4, +10 -> +1
    assert cost["cost_ttft_p50_ms"] == 1.0 and cost["cost_ttft_p50_ms_range"] == [0.5, 20.0]
    assert cost["cost_ttft_p99_ms"] == 1.0 and cost["cost_ttft_p99_ms_range"] == [-4.0, 10.0]


def test_its_keys_name_both_rows_and_the_cost_apart_from_the_tap_tables_litellm_keys() -> None:
    keys = flat_keys(PART)
    assert keys["litellm_alone_added_ttft_p50_ms_4"] == 10.0
    assert keys["litellm_handler_added_ttft_p50_ms_4"] == 11.0
    assert keys["litellm_handler_cost_ttft_p50_ms_4"] == 1.0
    assert keys["litellm_handler_cpu_s_per_1k_chunks_4"] == 1.1
    assert not any(k.startswith("litellm_added") for k in keys)  # the tap part's LiteLLM row keeps its keys


def test_the_table_shows_both_rows_the_cost_the_load_and_the_records_shipped() -> None:
    results = {
        "date": "2026-12-01T10:00:00+00:00", "duration_s": 1.0,
        "machine": {"cpu_model": "x", "cores": 2, "memory_gib": 1, "kernel": "6", "python": "3.11"},
        "load_avg_start": [0, 0, 0], "load_avg_end": [0, 0, 0],
        "goals": [asdict(g) for g in evaluate_goals({})], "details": {"litellm": PART},
    }  # fmt: skip
    text = render(results, {"litellm_method": "Method {litellm_handler_cost_ttft_p50_ms_4:.1f}."})
    assert "## LiteLLM with lanewatch's handler" in text
    assert "Load average (1, 5, 15 min) at its start [1.5, 1.2, 1.0], at its end [1.7, 1.3, 1.1]" in text
    assert "| 4 | litellm | 100 | 60.00 / 80.00 | +10.00 / +29.00 | — |" in text
    assert (
        "| 4 | litellm-lanewatch | 98 | 61.00 / 81.00 | +11.00 / +30.00 | +1.00 / +1.00 (+0.50…+20.00) |"
        in text
    )
    assert "took 120 records for the 98 requests" in text
    assert "Method ?." in text  # the notes' fields come from the results' keys, which rerender derives
    assert "Method 1.0." in render(
        rerender(results), {"litellm_method": "Method {litellm_handler_cost_ttft_p50_ms_4:.1f}."}
    )


def test_merging_one_part_replaces_its_details_and_keeps_the_rest_of_the_stored_run() -> None:
    stored = {"date": "old", "load_avg_start": [0.3], "details": {"tap": {"64": {}}, "litellm": {"old": 1}}}
    measured = {"date": "new", "load_avg_start": [4.0], "details": {"litellm": PART}}
    merged = merge_parts(stored, measured, ("litellm",))
    assert merged["date"] == "old" and merged["load_avg_start"] == [0.3]  # the full run's header stays
    assert merged["details"] == {"tap": {"64": {}}, "litellm": PART}
    assert merge_parts(stored, {"details": {}}, ("litellm",)) == stored  # nothing measured: as it was


def test_the_handler_path_ships_to_a_sink_of_its_own_and_loads_as_deployed(tmp_path: Path) -> None:
    assert (
        "litellm-lanewatch" in PEERS and "litellm-lanewatch" in SHIPPING and "litellm-lanewatch" in STAMPLESS
    )
    token = tmp_path / "admin-token"
    settings = settings_from(handler_settings("http://127.0.0.1:9999", 4001, token))
    assert settings.collector_url == "http://127.0.0.1:9999" and settings.lanes == {"bench": "bench"}
    assert (settings.admin_port, settings.admin_token_file) == (4001, token)  # the degrade endpoint is up
