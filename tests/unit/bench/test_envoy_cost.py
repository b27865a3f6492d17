"""The bench's Envoy-cost part: the bootstrap it builds from the shipped file, the counters it reads,
the costs it derives round by round and per entry, its keys and its table."""

from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from bench.envoy_cost import envoy_costs, flat_keys, totals
from bench.envoy_proxy import ACCESS_LOG_YAML, envoy_bootstrap, lanewatch_bootstrap
from bench.peer_paths import COLLECTING, PEERS, IdleGaps, envoy_counters, metric_total
from bench.report import evaluate_goals, render
from bench.tap_overhead import parse_peers


def _hcm(config: dict[str, Any]) -> dict[str, Any]:
    hcm: dict[str, Any] = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0][
        "typed_config"
    ]
    return hcm


def test_the_lanewatch_bootstrap_carries_the_shipped_blocks_pointed_at_the_collector() -> None:
    shipped = _hcm(yaml.safe_load(ACCESS_LOG_YAML.read_text()))
    config = lanewatch_bootstrap(10000, 9901, 8001, 4999)
    hcm = _hcm(config)
    for key in ("access_log", "access_log_options", "request_id_extension", "generate_request_id"):
        assert hcm[key] == shipped[key], key
    assert hcm["tracing"]["random_sampling"] == shipped["tracing"]["random_sampling"]
    for sender in (hcm["access_log"][0], hcm["tracing"]["provider"]):  # OTLP/HTTP to the collector's port
        assert sender["typed_config"]["http_service"]["http_uri"]["cluster"] == "lanewatch_collector"
    clusters = {c["name"]: c for c in config["static_resources"]["clusters"]}
    assert set(clusters) == {"fast", "lanewatch_collector"}
    address = clusters["lanewatch_collector"]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    assert address["endpoint"]["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 4999}
    # the tracer's spans batched as the shipped bootstrap batches them
    assert config["layered_runtime"] == yaml.safe_load(ACCESS_LOG_YAML.read_text())["layered_runtime"]
    # the rest is the plain bootstrap's: same routes' timeouts, same circuit breakers
    plain = envoy_bootstrap(10000, 9901, 8001, cluster="fast")
    assert clusters["fast"] == plain["static_resources"]["clusters"][0]
    assert hcm["route_config"] == _hcm(plain)["route_config"]
    assert not {"access_log", "tracing"} & set(_hcm(envoy_bootstrap(10000, 9901, 8001)))


def test_without_the_flush_only_the_periodic_option_is_left_out() -> None:
    hcm = _hcm(lanewatch_bootstrap(10000, 9901, 8001, 4999, flush=False))
    assert "access_log_options" not in hcm and "access_log" in hcm and "tracing" in hcm


def test_the_counters_come_from_envoys_stats_and_the_collectors_page() -> None:
    stats = (
        "access_logs.open_telemetry_access_log.logs_dropped: 2\n"
        "access_logs.open_telemetry_access_log.logs_written: 300\n"
        "tracing.opentelemetry.spans_sent: 99\ntracing.opentelemetry.timer_flushed: 7\n"
        "cluster.lanewatch_collector.upstream_rq_total: 22\n"
    )
    page = (
        "# TYPE lanewatch_otlp_log_records_received_total counter\n"
        "lanewatch_otlp_log_records_received_total 100.0\n"
        'lanewatch_otlp_log_records_refused_total{reason="x"} 1.0\n'
        'lanewatch_otlp_log_records_refused_total{reason="y"} 2.0\n'
        "lanewatch_otlp_log_records_received_total_other 5.0\n"
    )
    assert envoy_counters(stats, page) == {
        "log_entries_written": 300.0, "log_entries_dropped": 2.0, "spans_sent": 99.0,
        "collector_calls": 22.0, "records_taken": 100.0, "log_records_refused": 3.0,
    }  # fmt: skip
    assert metric_total(page, "lanewatch_absent_total") == 0.0


def _sample(requests: int, proxy: float, collector: float | None, **counters: float) -> SimpleNamespace:
    load = SimpleNamespace(requests=requests, chunks=requests * 41)
    return SimpleNamespace(load=load, proxy_cpu_s=proxy, sink_cpu_s=collector, counters=counters)


def _row(p50s: list[float], p99s: list[float]) -> dict[str, Any]:
    rounds = [{"ttft_p50_ms": a, "ttft_p99_ms": b} for a, b in zip(p50s, p99s, strict=True)]
    return {
        "requests": 200, "errors": 0, "chunks_per_s": 1000.0, "ttft_p50_ms": p50s[0], "ttft_p99_ms": p99s[0],
        "added_ttft_p50_ms": p50s[0] - 50, "added_ttft_p99_ms": p99s[0] - 51,
        "proxy_cpu_s_per_1k_chunks": 0.1, "proxy_user_cpu_s_per_1k_chunks": 0.05,
        "upstream_cpu_s_per_1k_chunks": 0.2, "client_cpu_s_per_1k_chunks": 0.1, "rounds": rounds,
    }  # fmt: skip


ROWS = {
    "direct": _row([50.0, 50.0], [51.0, 51.0]),
    "envoy": _row([51.0, 52.0], [53.0, 60.0]),
    "envoy-lanewatch": _row([52.0, 55.0], [55.0, 58.0]),
    "envoy-lanewatch-end": _row([51.5, 52.5], [54.0, 61.0]),
}
# 200 requests each; with the flush Envoy wrote 600 entries (400 periodic), without it 200
SUMS = {
    "direct": totals([_sample(100, 0.0, None)] * 2),
    "envoy": totals([_sample(100, 0.05, None)] * 2),
    "envoy-lanewatch": totals(
        [_sample(100, 0.08, 0.09, log_entries_written=300, records_taken=100, spans_sent=100)] * 2
    ),
    "envoy-lanewatch-end": totals(
        [_sample(100, 0.07, 0.05, log_entries_written=100, records_taken=100, spans_sent=100)] * 2
    ),
}
# the collectors idle at 5 ms of CPU a second between samples (10 s), each sample 4 s long
IDLE = {"collector_idle_cpu_s": 0.05, "collector_idle_s": 10.0, "collector_wall_s": 4.0}
for _path in ("envoy-lanewatch", "envoy-lanewatch-end"):
    SUMS[_path]["counters"] |= IDLE


def test_totals_sum_every_sample_and_its_counters() -> None:
    t = SUMS["envoy-lanewatch"]
    assert t["requests"] == 200 and t["chunks"] == 200 * 41
    assert t["proxy_cpu_s"] == pytest.approx(0.16) and t["collector_cpu_s"] == pytest.approx(0.18)
    assert t["counters"] == {"log_entries_written": 600, "records_taken": 200, "spans_sent": 200} | IDLE
    assert SUMS["envoy"]["collector_cpu_s"] == 0.0 and SUMS["envoy"]["counters"] == {}


def test_the_costs_per_request_per_record_and_per_periodic_entry() -> None:
    cost = envoy_costs(ROWS, SUMS)
    assert cost["envoy"]["envoy_cpu_ms_per_request"] == pytest.approx(0.5)
    flush, end = cost["envoy-lanewatch"], cost["envoy-lanewatch-end"]
    assert flush["envoy_cpu_ms_per_request"] == pytest.approx(0.8)
    assert flush["added_envoy_cpu_ms_per_request"] == pytest.approx(0.3)
    assert end["added_envoy_cpu_ms_per_request"] == pytest.approx(0.2)
    # TTFT over plain Envoy round by round: +1, +3 -> median 2; p99 +2, -2 -> 0
    assert flush["added_ttft_p50_ms"] == 2.0 and flush["added_ttft_p50_ms_range"] == [1.0, 3.0]
    assert flush["added_ttft_p99_ms"] == 0.0
    assert flush["periodic_per_request"] == 2.0 and end["periodic_per_request"] == 0.0
    assert flush["spans_per_request"] == 1.0
    assert flush["collector_cpu_ms_per_record"] == pytest.approx(0.9)
    assert flush["collector_cpu_ms_per_log_entry"] == pytest.approx(0.3)
    assert end["collector_cpu_ms_per_record"] == pytest.approx(0.5)
    # net of idle: 5 ms/s over 4 s of samples is 0.02 s of the 0.18 s and of the 0.10 s
    assert flush["collector_idle_cpu_ms_per_s"] == pytest.approx(5.0)
    assert flush["collector_net_cpu_ms_per_record"] == pytest.approx(0.8)
    assert flush["collector_net_cpu_ms_per_log_entry"] == pytest.approx(0.8 / 3)
    assert end["collector_net_cpu_ms_per_record"] == pytest.approx(0.4)
    # a periodic entry: (0.8 - 0.7) ms / 2 = 50 us of Envoy's, (0.8 - 0.4) ms / 2 = 200 us of the collector's
    assert cost["periodic"]["envoy_cpu_us_per_entry"] == pytest.approx(50.0)
    assert cost["periodic"]["collector_cpu_us_per_entry"] == pytest.approx(200.0)
    assert "direct" not in cost


def test_a_row_that_could_not_run_leaves_its_costs_out() -> None:
    rows = {k: v for k, v in ROWS.items() if k != "envoy-lanewatch-end"}
    sums = {k: v for k, v in SUMS.items() if k != "envoy-lanewatch-end"}
    cost = envoy_costs(rows, sums)
    assert "periodic" not in cost and "envoy-lanewatch-end" not in cost
    assert cost["envoy-lanewatch"]["collector_cpu_ms_per_record"] == pytest.approx(0.9)
    alone = envoy_costs({"direct": ROWS["direct"]}, {"direct": SUMS["direct"]})
    assert alone == {}


PART = {
    "date": "2026-12-05T09:10:00+00:00", "duration_s": 120.0, "load_avg_start": [1.5, 1.2, 1.0],
    "load_avg_end": [1.7, 1.3, 1.1], "rounds": 2, "seconds": 3.0, "levels": {"64": ROWS},
    "totals": {"64": SUMS}, "cost": {"64": envoy_costs(ROWS, SUMS)}, "unavailable": {},
}  # fmt: skip


def test_its_keys_name_each_envoy_row_apart_from_the_tap_tables_envoy_keys() -> None:
    keys = flat_keys(PART)
    assert keys["envoy_plain_envoy_cpu_ms_per_request_64"] == 0.5
    assert keys["envoy_lanewatch_added_ttft_p50_ms_64"] == 2.0
    assert keys["envoy_lanewatch_collector_cpu_ms_per_record_64"] == 0.9
    assert keys["envoy_lanewatch_end_collector_cpu_ms_per_record_64"] == 0.5
    assert keys["envoy_lanewatch_end_collector_net_cpu_ms_per_record_64"] == 0.4
    assert keys["envoy_lanewatch_cpu_s_per_1k_chunks_64"] == 0.1
    assert keys["envoy_periodic_collector_cpu_us_per_entry_64"] == 200.0
    plain = keys["envoy_plain_envoy_cpu_ms_per_request_64"]
    ratio = keys["envoy_lanewatch_envoy_cpu_ms_per_request_64"] / plain
    assert keys["envoy_lanewatch_vs_envoy_cpu_ratio_64"] == pytest.approx(ratio, abs=1e-4) and ratio > 1
    assert not any(k.startswith("envoy_cpu") or k.startswith("envoy_added") for k in keys)


def test_the_table_shows_every_row_the_costs_and_the_load() -> None:
    results = {
        "date": "2026-12-01T10:00:00+00:00", "duration_s": 1.0,
        "machine": {"cpu_model": "x", "cores": 2, "memory_gib": 1, "kernel": "6", "python": "3.11"},
        "load_avg_start": [0, 0, 0], "load_avg_end": [0, 0, 0],
        "goals": [asdict(g) for g in evaluate_goals({})], "details": {"envoycost": PART},
    }  # fmt: skip
    text = render(results, {"envoy_cost_method": "METHOD"})
    section = text.split("## Envoy with lanewatch's access log and tracing", 1)[1]
    assert "2026-12-05T09:10:00+00:00" in section and "[1.5, 1.2, 1.0]" in section and "METHOD" in section
    lines = [line for line in section.splitlines() if line.startswith("| 64 |")]
    assert [line.split(" | ")[1] for line in lines] == [
        "direct", "envoy", "envoy-lanewatch", "envoy-lanewatch-end",
    ]  # fmt: skip
    flush = lines[2]
    assert "+2.00 / +0.00 (+1.00…+3.00)" in flush and "0.800 (+0.300)" in flush
    assert "3.00 / 2.00 / 1.00" in flush and "| 0.900 (0.800) | 0.300 (0.267) |" in flush
    assert "5.0 (`envoy-lanewatch`) and 5.0 (`envoy-lanewatch-end`) ms of CPU a second" in section
    assert "one periodic entry costs Envoy 50.0 µs of CPU and the collector 200.0 µs" in section


def test_the_new_peers_are_known_to_the_tap_bench() -> None:
    assert set(PEERS) >= COLLECTING
    assert parse_peers("64:envoy+envoy-lanewatch+envoy-lanewatch-end") == {
        64: ["envoy", "envoy-lanewatch", "envoy-lanewatch-end"]
    }


def test_the_idle_gap_before_each_sample_is_credited_at_its_end() -> None:
    gaps = IdleGaps()
    # sample 1 from t=0 to 4 (no gap before it), idle until 10, sample 2 from 10 to 14
    readings = [(1.0, 0.0), (1.5, 4.0), (1.56, 10.0), (2.0, 14.0)]
    out = [gaps.reading(cpu, now) for cpu, now in readings]
    assert out[1]["collector_idle_s"] - out[0]["collector_idle_s"] == 0.0  # the first sample has no gap
    assert out[2]["collector_idle_s"] == 0.0  # the gap counts only once its sample ends
    assert out[3]["collector_idle_s"] - out[2]["collector_idle_s"] == pytest.approx(6.0)
    assert out[3]["collector_idle_cpu_s"] - out[2]["collector_idle_cpu_s"] == pytest.approx(0.06)
    assert out[3]["collector_wall_s"] - out[2]["collector_wall_s"] == pytest.approx(
        4.0
    )  # the sample's length
