"""What the Envoy path costs: Envoy with lanewatch's access log and tracing beside Envoy without them.

Four paths in front of the tap bench's upstream (bench/sse_light.py: each answer streams for
0.45 s, so the 0.2 s periodic flush writes entries while it is under way) in one run: `direct`,
`envoy` (the tap table's static bootstrap, one worker thread, no access log, no tracing),
`envoy-lanewatch` (the same bootstrap with deploy/envoy/access-log.yaml's access log, its periodic
flush, request ids and tracing, sending to a real `lanewatch collect` of its own: OTLP/gRPC
receiver on, fast guard on) and `envoy-lanewatch-end` (the same without the periodic flush). At
each concurrency they run in interleaved rounds, the order rotating each round
(bench/tap_overhead.py), so load from other work on the shared machine hits every Envoy alike.
After each round of a collecting path the readings wait bench/peer_paths.py's SETTLE_S, so the
entries Envoy sends once a second are all in the collector's CPU and counters.

- Envoy's CPU per request and per 1,000 chunks; what the access log and tracing add per request
- added TTFT: a lanewatch row's TTFT quantile − `envoy`'s in the same round, the median over rounds
- the collector's CPU per record (a request's end entry, its span and its guard verdict), per
  periodic entry (the flush row's CPU per request over the end-only row's, per periodic entry)
- the same again with answers that stream for 10 s (1,000 chunks; levels named `<n>_10s`), where
  the periodic flush writes an entry each 0.2 s of a stream's first 3 s: what Envoy spends on the
  guard's evidence against what it spends forwarding the answer

Run alone: `python -m bench --only envoycost --out DIR`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .machine import machine_facts, part_facts
from .tap_overhead import paired_diffs, run_tap_bench, summarize_level

__all__ = [
    "END_ONLY", "LONG_CHUNKS", "PATHS", "PLAIN", "WITH_FLUSH", "envoy_costs", "flat_keys", "run_envoy_cost",
    "totals",
]  # fmt: skip

PLAIN, WITH_FLUSH, END_ONLY = "envoy", "envoy-lanewatch", "envoy-lanewatch-end"
PATHS = ("direct", PLAIN, WITH_FLUSH, END_ONLY)
_NET = "collector_net_cpu_ms_per_record"
LONG_CHUNKS = 1000  # 10 ms apart: answers that stream for 10 s
LONG = "_10s"  # the long answers' level suffix


def totals(samples: Sequence[Any]) -> dict[str, Any]:
    """One path's samples (bench/tap_overhead.py's) summed: requests, chunks, CPU, counters' growth."""
    counters: dict[str, float] = {}
    for s in samples:
        for k, v in s.counters.items():
            counters[k] = counters.get(k, 0.0) + v
    return {
        "requests": sum(s.load.requests for s in samples),
        "chunks": sum(s.load.chunks for s in samples),
        "proxy_cpu_s": sum(s.proxy_cpu_s for s in samples),
        "collector_cpu_s": sum(s.sink_cpu_s or 0.0 for s in samples),
        "counters": counters,
    }


def _per(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def envoy_costs(
    rows: Mapping[str, Mapping[str, Any]], sums: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """One concurrency's costs from its rows (summarize_level) and each path's `totals`.

    Per Envoy path: its CPU per request (ms). Per lanewatch path besides: over `envoy`, the CPU per
    request it adds and its TTFT quantiles round by round; the collector's CPU per record (its CPU
    over the records it took, the periodic entries and spans that came with them included) and per
    log entry, as measured and net of what it spends idle (its CPU rate between its samples, over
    each sample's length); the entries and spans Envoy sent per request. With both lanewatch paths,
    what one periodic entry costs Envoy and the collector (net): the flush row's CPU per request
    minus the end-only row's, over the periodic entries per request."""
    out: dict[str, Any] = {}
    for path in (PLAIN, WITH_FLUSH, END_ONLY):
        t = sums.get(path)
        if t is None or not t["requests"]:
            continue
        f: dict[str, Any] = {"envoy_cpu_ms_per_request": t["proxy_cpu_s"] / t["requests"] * 1e3}
        c = t["counters"]
        if path != PLAIN and c:
            records = c.get("records_taken", 0.0)
            entries = c.get("log_entries_written", 0.0)
            ends = records + c.get("log_records_refused", 0.0)
            gross = t["collector_cpu_s"]
            idle_s = c.get("collector_idle_s", 0.0)
            idle_rate = c.get("collector_idle_cpu_s", 0.0) / idle_s if idle_s > 0 else 0.0
            net = max(gross - idle_rate * c.get("collector_wall_s", 0.0), 0.0)
            f |= {
                "collector_idle_cpu_ms_per_s": idle_rate * 1e3,
                "collector_net_cpu_ms_per_record": _ms(_per(net, records)),
                "collector_net_cpu_ms_per_log_entry": _ms(_per(net, entries)),
                "records": records,
                "log_entries": entries,
                "periodic_entries": max(entries - ends, 0.0),
                "periodic_per_request": max(entries - ends, 0.0) / t["requests"],
                "spans_per_request": c.get("spans_sent", 0.0) / t["requests"],
                # the OTLP calls Envoy made to the collector, logs and spans: what costs it most
                "collector_calls_per_request": c.get("collector_calls", 0.0) / t["requests"],
                "log_entries_dropped": c.get("log_entries_dropped", 0.0),
                "collector_cpu_ms_per_record": _ms(_per(t["collector_cpu_s"], records)),
                "collector_cpu_ms_per_log_entry": _ms(_per(t["collector_cpu_s"], entries)),
            }
        if path != PLAIN and PLAIN in out and path in rows and PLAIN in rows:
            f["added_envoy_cpu_ms_per_request"] = (
                f["envoy_cpu_ms_per_request"] - out[PLAIN]["envoy_cpu_ms_per_request"]
            )
            f |= paired_diffs(rows[PLAIN]["rounds"], rows[path]["rounds"], "added")
        out[path] = f
    flush, end = out.get(WITH_FLUSH, {}), out.get(END_ONLY, {})
    periodic = flush.get("periodic_per_request") or 0.0
    if periodic > 0 and "collector_cpu_ms_per_record" in end:
        out["periodic"] = {
            "envoy_cpu_us_per_entry": (flush["envoy_cpu_ms_per_request"] - end["envoy_cpu_ms_per_request"])
            / periodic
            * 1e3,
            "collector_cpu_us_per_entry": _us_diff(
                flush.get("collector_net_cpu_ms_per_record"),
                end.get("collector_net_cpu_ms_per_record"),
                periodic,
            ),
        }
    return out


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _us_diff(a_ms: float | None, b_ms: float | None, per: float) -> float | None:
    return None if a_ms is None or b_ms is None else (a_ms - b_ms) / per * 1e3


def run_envoy_cost(
    streams: Sequence[int],
    rounds: int,
    seconds: float,
    log: Callable[[str], None] = print,
    long_rounds: int = 0,
    long_seconds: float = 10.0,
) -> dict[str, Any]:
    """Measure the four paths at each concurrency, and with `long_rounds`, again with 10 s answers
    (`long_seconds` of requests started a round): results.json's `details.envoycost`."""
    started, facts = time.monotonic(), machine_facts()
    bench = run_tap_bench(streams, rounds, seconds, PATHS, log=log)
    samples, unavailable = dict(bench.samples), dict(bench.unavailable)
    if long_rounds:
        long = run_tap_bench(
            streams, long_rounds, long_seconds, PATHS, log=log, chunks=LONG_CHUNKS, label=LONG
        )
        samples |= long.samples
        unavailable |= long.unavailable
    levels = {n: summarize_level(s) for n, s in samples.items()}
    sums = {n: {path: totals(s) for path, s in level.items()} for n, level in samples.items()}
    return {
        **part_facts(facts, started),
        "rounds": rounds,
        "seconds": seconds,
        "long_rounds": long_rounds,
        "long_seconds": long_seconds,
        "levels": levels,
        "totals": sums,
        "cost": {n: envoy_costs(levels[n], sums[n]) for n in levels},
        "unavailable": unavailable,
    }


_KEYS = {
    PLAIN: "envoy_plain",
    WITH_FLUSH: "envoy_lanewatch",
    END_ONLY: "envoy_lanewatch_end",
}
_FLAT = (
    "envoy_cpu_ms_per_request", "added_envoy_cpu_ms_per_request", "added_ttft_p50_ms", "added_ttft_p99_ms",
    "collector_cpu_ms_per_record", "collector_cpu_ms_per_log_entry", "collector_net_cpu_ms_per_record",
    "collector_net_cpu_ms_per_log_entry", "collector_idle_cpu_ms_per_s", "periodic_per_request",
    "spans_per_request", "collector_calls_per_request",
)  # fmt: skip


def flat_keys(r: Mapping[str, Any]) -> dict[str, float]:
    """results.json keys: per Envoy row its CPU per request and chunk, what lanewatch adds, the
    collector's CPU per record and entry, per concurrency (apart from the tap table's `envoy_` keys)."""
    out: dict[str, float] = {}
    for n, cost in r.get("cost", {}).items():
        for path, prefix in _KEYS.items():
            row = r["levels"][n].get(path)
            if row is not None:
                out[f"{prefix}_cpu_s_per_1k_chunks_{n}"] = round(float(row["proxy_cpu_s_per_1k_chunks"]), 4)
            for key in _FLAT:
                value = cost.get(path, {}).get(key)
                if isinstance(value, int | float):
                    out[f"{prefix}_{key}_{n}"] = round(float(value), 4)
        for key, value in cost.get("periodic", {}).items():
            if isinstance(value, int | float):
                out[f"envoy_periodic_{key}_{n}"] = round(float(value), 3)
        plain = cost.get(PLAIN, {}).get("envoy_cpu_ms_per_request")
        for path, prefix in ((WITH_FLUSH, "envoy_lanewatch"), (END_ONLY, "envoy_lanewatch_end")):
            mine = cost.get(path, {}).get("envoy_cpu_ms_per_request")
            if plain and mine is not None:  # Envoy's CPU per request with lanewatch over without
                out[f"{prefix}_vs_envoy_cpu_ratio_{n}"] = round(mine / plain, 4)
    return out
