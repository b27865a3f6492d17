"""`make bench` / `python -m bench`: every benchmark in one run → bench/results.json and bench/results.md.

    python -m bench                     # the full run (a few minutes); writes bench/results.*
    python -m bench --smoke --out DIR   # tiny sizes, seconds: what tests/integration/test_bench_smoke.py runs
    python -m bench --only tap,probe    # some parts (see PARTS)
    python -m bench --only litellm --out DIR --merge bench   # one part, into the committed results
    python -m bench --only envoycost --out DIR --merge bench
    python -m bench --render            # no measuring: the goals again over results.json, results.md

The parts run one after another on the same machine, so their processes never share the
cores with each other; the load average is recorded at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import (
    collector_cost,
    degrade_loop,
    diagnose_cost,
    diagnose_prometheus,
    envoy_cost,
    fast_loop,
    fleet_cost,
    ingest_cost,
    litellm_handler,
    probe_accuracy,
    probe_cost,
    router_apply,
    tap_overhead,
)
from .machine import machine_facts, tool_versions
from .nginx import find_nginx
from .report import evaluate_goals, render

PARTS = (
    "tap", "probe", "collector", "probecost", "ingest", "fleet", "degrade", "routers", "fastloop",
    "diagnose", "diagnoseprom", "litellm", "envoycost",
)  # fmt: skip


@dataclass(frozen=True)
class Sizes:
    """How much each part measures."""

    streams: tuple[int, ...] = (1, 64, 256, 512)
    pinned: tuple[int, ...] = (64,)  # measured again with each proxy on a core of its own
    peers: tuple[tuple[int, tuple[str, ...]], ...] = (
        (64, ("envoy", "envoy-2", "litellm")),
        (256, ("nginx-2", "tap-2")),
        (512, ("nginx-2", "tap-2")),
    )  # more paths, at these concurrencies only (bench/peer_paths.py)
    rounds: int = 5
    seconds: float = 3.0
    probes: int = 400
    curl: int = 60
    collector_s: float = 20.0
    collector_warmup_s: float = 5.0
    parse_repeats: int = 200
    probe_cost_s: float = 20.0  # each side: lanewatch, then blackbox_exporter
    probe_cost_warmup_s: float = 4.0
    ingest_records: int = 20_000
    fleet_targets: tuple[int, ...] = (250, 500, 1000)
    fleet_s: float = 15.0
    fleet_warmup_s: float = 16.0  # past the first scrape interval (15 s): every target connected
    degrade_trials: int = 5
    group_interval: str = degrade_loop.GROUP_INTERVAL
    router_trials: int = 10
    fast_loop_trials: int = 5
    fast_loop_scenarios: tuple[str, ...] = tuple(fast_loop.SCENARIOS)
    diagnose_records: int = 100_000
    # LiteLLM with and without lanewatch's handler (bench/litellm_handler.py), where the proxy's core
    # has room: at 64 streams (the tap table's level) LiteLLM alone is CPU-bound, and in a trial run
    # its TTFT p50 went from 1.65 to 3.36 s between rounds, which hides a cost of a few ms
    litellm_streams: tuple[int, ...] = (1, 4)
    litellm_rounds: int = 15
    # Envoy with lanewatch's access log and tracing beside Envoy alone (bench/envoy_cost.py), at the
    # tap table's Envoy level
    envoy_cost_streams: tuple[int, ...] = (64,)
    envoy_cost_rounds: int = 16
    envoy_cost_long_rounds: int = 4  # again with 10 s answers (0: not measured)
    envoy_cost_long_s: float = 10.0


SMOKE = Sizes(
    streams=(1, 4), pinned=(4,), peers=(), rounds=1, seconds=0.6, probes=12, curl=4, collector_s=2.0,
    collector_warmup_s=2.5, parse_repeats=5, probe_cost_s=2.0, probe_cost_warmup_s=1.0, ingest_records=512,
    fleet_targets=(20,), fleet_s=3.0, fleet_warmup_s=2.0, degrade_trials=1, group_interval="1s",
    router_trials=1, fast_loop_trials=1, fast_loop_scenarios=("probes-1s",), diagnose_records=2_000,
    litellm_streams=(), litellm_rounds=1, envoy_cost_streams=(4,), envoy_cost_rounds=1,
    envoy_cost_long_rounds=0,
)  # fmt: skip


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(sizes: Sizes, parts: tuple[str, ...], tmp: Path) -> dict[str, Any]:
    """Run the parts; the results dict that results.json holds."""
    started = time.monotonic()
    facts = machine_facts()
    keys: dict[str, Any] = {}
    details: dict[str, Any] = {}
    if "tap" in parts:
        pinned = f"; {', '.join(map(str, sizes.pinned))} pinned" if sizes.pinned else ""
        _log(f"tap overhead: {', '.join(map(str, sizes.streams))} streams{pinned}, {sizes.rounds} rounds")
        bench = tap_overhead.run_tap_bench(
            sizes.streams, sizes.rounds, sizes.seconds, log=_log, pinned=sizes.pinned,
            extra={n: names for n, names in sizes.peers},
        )  # fmt: skip
        levels = {n: tap_overhead.summarize_level(s) for n, s in bench.samples.items()}
        details["tap"] = levels
        if bench.unavailable:
            details["tap_unavailable"] = bench.unavailable
        keys |= tap_overhead.flat_keys(levels)
    if "probe" in parts:
        _log(f"prober accuracy: {sizes.probes} probes")
        r = probe_accuracy.run_probe_accuracy(sizes.probes, sizes.curl, tmp / "probe")
        details["probe"] = r
        keys |= probe_accuracy.flat_keys(r)
    if "collector" in parts:
        _log(f"collector cost: {sizes.collector_s:.0f} s at 10 probes/s, 10 targets")
        r = collector_cost.run_collector_cost(
            sizes.collector_s, sizes.collector_warmup_s, sizes.parse_repeats, tmp / "collector"
        )
        details["collector"] = r
        keys |= collector_cost.flat_keys(r)
    if "probecost" in parts:
        _log(f"probe cost: lanewatch and blackbox_exporter, {sizes.probe_cost_s:.0f} s each at 10 probes/s")
        r = probe_cost.run_probe_cost(sizes.probe_cost_s, sizes.probe_cost_warmup_s, tmp / "probecost")
        details["probecost"] = r
        keys |= probe_cost.flat_keys(r)
    if "ingest" in parts:
        _log(f"ingest: {sizes.ingest_records:,} records through POST /v1/records, spans for half")
        r = ingest_cost.run_ingest_cost(sizes.ingest_records, tmp / "ingest")
        details["ingest"] = r
        keys |= ingest_cost.flat_keys(r)
    if "fleet" in parts:
        _log(f"fleet: {', '.join(map(str, sizes.fleet_targets))} targets, {sizes.fleet_s:.0f} s each")
        r = fleet_cost.run_fleet_cost(sizes.fleet_targets, sizes.fleet_s, sizes.fleet_warmup_s, tmp / "fleet")
        details["fleet"] = r
        keys |= fleet_cost.flat_keys(r)
    if "degrade" in parts:
        _log(f"alert to degrade: {sizes.degrade_trials} trials")
        r = degrade_loop.run_degrade_loop(sizes.degrade_trials, tmp / "degrade", sizes.group_interval)
        details["degrade"] = r
        keys |= degrade_loop.flat_keys(r)
    if "routers" in parts:
        _log(f"router apply: {sizes.router_trials} shifts and restores per router")
        r = router_apply.run_router_apply(sizes.router_trials, tmp / "routers")
        details["routers"] = r
        keys |= router_apply.flat_keys(r)
    if "fastloop" in parts:
        _log(f"fast loop: {', '.join(sizes.fast_loop_scenarios)}, {sizes.fast_loop_trials} faults each")
        r = fast_loop.run_fast_loop(sizes.fast_loop_trials, tmp / "fastloop", sizes.fast_loop_scenarios)
        details["fastloop"] = r
        keys |= fast_loop.flat_keys(r)
    if "diagnose" in parts:
        _log(f"diagnose: a {sizes.diagnose_records:,}-record file")
        r = diagnose_cost.run_diagnose_cost(sizes.diagnose_records, tmp / "diagnose")
        details["diagnose"] = r
        keys |= diagnose_cost.flat_keys(r)
    if "diagnoseprom" in parts:
        _log("diagnose: one Prometheus window, two lanes")
        r = diagnose_prometheus.run_diagnose_prometheus(tmp / "diagnoseprom")
        details["diagnoseprom"] = r
        keys |= diagnose_prometheus.flat_keys(r)
    if "litellm" in parts and sizes.litellm_streams:  # the smoke run has no LiteLLM venv to count on
        _log(
            "LiteLLM with and without lanewatch's handler: "
            f"{', '.join(map(str, sizes.litellm_streams))} streams"
        )
        r = litellm_handler.run_litellm_handler(
            sizes.litellm_streams, sizes.litellm_rounds, sizes.seconds, _log
        )
        details["litellm"] = r
        keys |= litellm_handler.flat_keys(r)
    if "envoycost" in parts and sizes.envoy_cost_streams:
        _log(
            "Envoy with lanewatch's access log and tracing, and without: "
            f"{', '.join(map(str, sizes.envoy_cost_streams))} streams, {sizes.envoy_cost_rounds} rounds"
        )
        r = envoy_cost.run_envoy_cost(
            sizes.envoy_cost_streams, sizes.envoy_cost_rounds, sizes.seconds, _log,
            sizes.envoy_cost_long_rounds, sizes.envoy_cost_long_s,
        )  # fmt: skip
        details["envoycost"] = r
        keys |= envoy_cost.flat_keys(r)
    end = machine_facts()
    return {
        "date": facts["date"],
        "machine": {k: v for k, v in facts.items() if k not in ("date", "load_avg")},
        "load_avg_start": facts["load_avg"],
        "load_avg_end": end["load_avg"],
        "duration_s": round(time.monotonic() - started, 1),
        "tools": tool_versions(find_nginx(), degrade_loop.find_alertmanager(), probe_cost.find_blackbox()),
        "sizes": asdict(sizes),
        **keys,
        "goals": [asdict(g) for g in evaluate_goals(keys)],
        "details": details,
    }


# Each part's results.json keys, derived from its `details` entry alone (what `run` adds per part).
_FLAT_KEYS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "tap": tap_overhead.flat_keys,
    "probe": probe_accuracy.flat_keys,
    "collector": collector_cost.flat_keys,
    "probecost": probe_cost.flat_keys,
    "ingest": ingest_cost.flat_keys,
    "fleet": fleet_cost.flat_keys,
    "degrade": degrade_loop.flat_keys,
    "routers": router_apply.flat_keys,
    "fastloop": fast_loop.flat_keys,
    "diagnose": diagnose_cost.flat_keys,
    "diagnoseprom": diagnose_prometheus.flat_keys,
    "litellm": litellm_handler.flat_keys,
    "envoycost": envoy_cost.flat_keys,
}


def rerender(results: dict[str, Any]) -> dict[str, Any]:
    """`results` with its keys derived again from its parts' details and its goals evaluated afresh.

    Nothing is measured: a goal restated in bench/report.py, or a key a part's `flat_keys` now
    derives from figures it already had, reaches results.json and results.md from the stored run.
    """
    details = results.get("details", {})
    keys = {k: v for k, v in results.items() if k not in ("goals", "details")}
    for part, flat in _FLAT_KEYS.items():
        if part in details:
            keys |= _json_safe(flat(details[part]))
    return {**keys, "goals": [asdict(g) for g in evaluate_goals(keys)], "details": details}


def _json_safe(value: Any) -> Any:
    """Infinities and NaN as strings: results.json stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def main() -> None:
    """Parse the flags, run, write results.json and results.md."""
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks that every part runs")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="where results.* go")
    ap.add_argument(
        "--render",
        action="store_true",
        help="measure nothing: the goals again over the results.json in --out; rewrite it and results.md",
    )
    ap.add_argument(
        "--merge",
        type=Path,
        help="after measuring, put the parts' details into the results.json in this folder (its other "
        "parts, date and load stay) and render it there again; a merged part records its own date and load",
    )
    args = ap.parse_args()
    if args.render:
        results = rerender(json.loads((args.out / "results.json").read_text()))
        (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        (args.out / "results.md").write_text(render(results))
        return
    parts = tuple(p.strip() for p in args.only.split(",") if p.strip())
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"--only: unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    with tempfile.TemporaryDirectory(prefix="lanewatch-bench-") as d:
        results = _json_safe(run(SMOKE if args.smoke else Sizes(), parts, Path(d)))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "results.md").write_text(render(results))
    _log(f"wrote {args.out / 'results.json'} and {args.out / 'results.md'} in {results['duration_s']} s")
    if args.merge is not None:
        base = json.loads((args.merge / "results.json").read_text())
        merged = rerender(merge_parts(base, results, parts))
        (args.merge / "results.json").write_text(json.dumps(merged, indent=1) + "\n")
        (args.merge / "results.md").write_text(render(merged))
        _log(f"merged {', '.join(parts)} into {args.merge / 'results.json'} and results.md")


def merge_parts(base: dict[str, Any], measured: dict[str, Any], parts: tuple[str, ...]) -> dict[str, Any]:
    """`base` with the details of `parts` taken from `measured` (a part measured nothing stays as it was)."""
    details = dict(base.get("details", {}))
    for part in parts:
        if part in measured.get("details", {}):
            details[part] = measured["details"][part]
    return {**base, "details": details}


if __name__ == "__main__":
    main()
