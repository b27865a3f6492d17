"""What lanewatch's handler costs the LiteLLM proxy: the same proxy with and without it, side by side.

Three paths in front of the tap bench's upstream (bench/sse_light.py) in one run: `direct`,
`litellm` (the proxy alone, bench/litellm_proxy.py's offline config, no callbacks) and
`litellm-lanewatch` (the same proxy and config with lanewatch's handler named in
`litellm_settings.callbacks`, as deployed: every request's record shipped to a records sink,
bench/records_sink.py, whose CPU is counted apart; the degrade endpoint up with no state set, so
the pre-call hook reads each request's class and finds nothing to do). At each concurrency the
three run in interleaved rounds, the order rotating each round (bench/tap_overhead.py), so load
from other work on the shared machine hits both LiteLLM rows alike.

- added TTFT: a path's TTFT quantile − direct's in the same round, the median over the rounds
- the handler's cost: `litellm-lanewatch`'s TTFT quantile − `litellm`'s in the same round, the
  median over the rounds (and their range)

Run alone: `python -m bench --only litellm --out DIR`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .machine import machine_facts, part_facts
from .tap_overhead import TTFT_FIGURES, paired_diffs, run_tap_bench, summarize_level

__all__ = ["ALONE", "PATHS", "WITH_HANDLER", "flat_keys", "handler_cost", "run_litellm_handler"]

ALONE, WITH_HANDLER = "litellm", "litellm-lanewatch"
PATHS = ("direct", ALONE, WITH_HANDLER)


def handler_cost(level: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Per TTFT quantile: the handler's row − LiteLLM alone's, round by round; the median and range."""
    return paired_diffs(level[ALONE]["rounds"], level[WITH_HANDLER]["rounds"], "cost")


def run_litellm_handler(
    streams: Sequence[int], rounds: int, seconds: float, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Measure the three paths at each concurrency: results.json's `details.litellm`."""
    started, facts = time.monotonic(), machine_facts()
    bench = run_tap_bench(streams, rounds, seconds, PATHS, log=log)
    levels = {n: summarize_level(s) for n, s in bench.samples.items()}
    return {
        **part_facts(facts, started),
        "rounds": rounds,
        "seconds": seconds,
        "levels": levels,
        "cost": {
            n: handler_cost(level) for n, level in levels.items() if {ALONE, WITH_HANDLER} <= set(level)
        },
        "shipped": bench.shipped,
        "unavailable": bench.unavailable,
    }


def flat_keys(r: Mapping[str, Any]) -> dict[str, float]:
    """results.json keys: each LiteLLM row's added TTFT and CPU, and the handler's cost, per concurrency."""
    out: dict[str, float] = {}
    rows = {"litellm_alone": ALONE, "litellm_handler": WITH_HANDLER}
    for n, level in r.get("levels", {}).items():
        for prefix, path in rows.items():
            f = level.get(path)
            if f is None:
                continue
            for key in ("added_ttft_p50_ms", "added_ttft_p99_ms", "proxy_cpu_s_per_1k_chunks"):
                out[f"{prefix}_{key.removeprefix('proxy_')}_{n}"] = round(float(f[key]), 4)
    for n, cost in r.get("cost", {}).items():
        for key in TTFT_FIGURES:
            out[f"litellm_handler_cost_{key}_{n}"] = round(float(cost[f"cost_{key}"]), 4)
    return out
