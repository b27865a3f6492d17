"""One collector, many targets: CPU, RSS and probe start delay at 250, 500 and 1,000 targets.

The upstream is bench/fleet_upstream.py: one process, one 127.0.0.1 port per target, each
streaming a 16-token answer (first chunk at 50 ms, then every 10 ms) and serving a
captured 445-line vLLM /metrics page. The collector runs as users run it (a subprocess
with a config file): every target probed every 10 s with one class (`short`, 16 tokens),
scraped every 15 s, the OTLP receiver on (no spans come, so every record waits its join
wait and leaves unjoined, as with a vLLM that exports no traces), probe concurrency 64.
After a warm-up (the first probes and scrapes spread over their intervals), CPU is the
collector's user + system seconds over the window (/proc/<pid>/stat) divided by it, RSS
is read at its end, and the start delay (how late probes start after their due time,
the wait for a concurrency slot included) is the p99 of the
lanewatch_probe_start_delay_seconds histogram's counts in the window, interpolated within
its bucket as Prometheus' histogram_quantile does, over every probe since the start
(warm-up included). /metrics is read once, after the CPU window, because rendering it is
a cost of its own that grows with the targets: its size, answer time and CPU are reported
apart (metrics_*).

Run alone: `python -m bench.fleet_cost [--sizes 250,500,1000 --seconds 20]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.collect.scrape import Buckets, bucket_quantile
from lanewatch.exporters import names
from tests.servers import free_port, stop_process

from .collector_cost import collector_process, totals_of
from .machine import cpu_s, rss_mb, runqueue_wait_s

__all__ = ["flat_keys", "run_fleet_cost"]

PROBE_INTERVAL_S = 10.0
SCRAPE_INTERVAL_S = 15.0
CONCURRENCY = 64
GOALS = {"cpu_cores": 1.0, "rss_mb": 300.0, "start_delay_p99_ms": 100.0}


@contextmanager
def _upstream(tmp: Path, count: int) -> Iterator[tuple[list[int], int]]:
    ports_file = tmp / f"ports-{count}.json"
    args = [
        sys.executable,
        "-m",
        "bench.fleet_upstream",
        "--count",
        str(count),
        "--ports-file",
        str(ports_file),
    ]
    log = (tmp / f"upstream-{count}.log").open("wb")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(args, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not ports_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"fleet upstream did not start:\n{(tmp / f'upstream-{count}.log').read_text()}"
                )
            time.sleep(0.1)
        yield json.loads(ports_file.read_text()), proc.pid
    finally:
        stop_process(proc)
        log.close()


def fleet_config(ports: list[int]) -> dict[str, Any]:
    """The collector config: one target per port, one class, scrapes every 15 s."""
    return {
        "targets": [
            {"name": f"t{i:04d}", "url": f"http://127.0.0.1:{port}", "model": "bench"}
            for i, port in enumerate(ports)
        ],
        "probe": {
            "interval_s": PROBE_INTERVAL_S,
            "concurrency": CONCURRENCY,
            "classes": [{"name": "short", "prompt_words": 12, "max_tokens": 16}],
        },
        "scrape": {"interval_s": SCRAPE_INTERVAL_S},
        "gpu": {"enabled": False},
    }


def start_delays(text: str) -> Buckets | None:
    """The probe start delay histogram on a /metrics page."""
    for family in text_string_to_metric_families(text):
        if family.name != names.PROBE_START_DELAY_SECONDS:
            continue
        pairs = sorted(
            (float(s.labels["le"]), float(s.value)) for s in family.samples if s.name.endswith("_bucket")
        )
        total = next((float(s.value) for s in family.samples if s.name.endswith("_sum")), 0.0)
        return Buckets(tuple(b for b, _ in pairs), tuple(c for _, c in pairs), total)
    return None


def _metrics(port: int) -> tuple[str, float]:
    """The collector's /metrics page and how long it took to answer (seconds)."""
    t0 = time.monotonic()
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=120).text
    return text, time.monotonic() - t0


def _one_size(tmp: Path, count: int, seconds: float, warmup_s: float) -> dict[str, Any]:
    port = free_port()
    with (
        _upstream(tmp, count) as (ports, upstream_pid),
        collector_process(tmp / f"c{count}", fleet_config(ports), port) as proc,
    ):
        up_at = time.monotonic()
        time.sleep(warmup_s)
        cpu0, t0, up0, wait0 = (
            cpu_s(proc.pid),
            time.monotonic(),
            cpu_s(upstream_pid),
            runqueue_wait_s(proc.pid),
        )
        time.sleep(seconds)
        cpu, elapsed = cpu_s(proc.pid) - cpu0, time.monotonic() - t0
        upstream_cpu, waited = cpu_s(upstream_pid) - up0, runqueue_wait_s(proc.pid) - wait0
        rss, rss_peak = rss_mb(proc.pid)
        # /metrics is read once, after the CPU window: rendering it is a cost of its own (below).
        ran_s = time.monotonic() - up_at
        page, render_s = _metrics(port)
        render_cpu = cpu_s(proc.pid) - cpu0 - cpu
    totals = totals_of(page)
    delays = start_delays(page)
    p99 = bucket_quantile(0.99, delays) if delays is not None else None
    p50 = bucket_quantile(0.5, delays) if delays is not None else None
    return {
        "targets": count,
        "window_s": round(elapsed, 1),
        # started, from the delay histogram: records leave the join only after its wait
        "probes_per_s": round(delays.count / ran_s, 2) if delays is not None else 0.0,
        "probe_errors": int(totals["errors"]),
        "targets_up": int(totals["scrape_up"]),
        "cpu_cores": round(cpu / elapsed, 3),
        # time the collector was runnable but had no core: on a shared machine, the load's share
        "runqueue_wait_s_per_s": round(waited / elapsed, 3),
        "upstream_cpu_cores": round(upstream_cpu / elapsed, 3),
        "rss_mb": round(rss, 1),
        "rss_peak_mb": round(rss_peak, 1),
        "start_delay_p50_ms": round(p50 * 1e3, 2) if p50 is not None else None,
        "start_delay_p99_ms": round(p99 * 1e3, 2) if p99 is not None else None,
        "probes_started": int(delays.count) if delays is not None else 0,
        "metrics_page_lines": page.count("\n"),
        "metrics_answer_s": round(render_s, 3),
        "metrics_render_cpu_s": round(render_cpu, 3),
    }


def run_fleet_cost(sizes: tuple[int, ...], seconds: float, warmup_s: float, tmp: Path) -> dict[str, Any]:
    """Each size in turn, smallest first; the largest is the fleet row."""
    tmp.mkdir(parents=True, exist_ok=True)
    rows = [_one_size(tmp, n, seconds, warmup_s) for n in sorted(sizes)]
    return {
        "probe_interval_s": PROBE_INTERVAL_S,
        "scrape_interval_s": SCRAPE_INTERVAL_S,
        "concurrency": CONCURRENCY,
        "rows": rows,
    }


def flat_keys(r: dict[str, Any]) -> dict[str, float | None]:
    """The results.json keys of this part: the largest size measured."""
    top = r["rows"][-1]
    prefix = "fleet_1000" if top["targets"] == 1000 else f"fleet_{top['targets']}"
    return {
        f"{prefix}_cpu_cores": top["cpu_cores"],
        f"{prefix}_rss_mb": top["rss_mb"],
        f"{prefix}_start_delay_p99_ms": top["start_delay_p99_ms"],
    }


def main() -> None:
    """Run this part alone and print its JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="250,500,1000")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--warmup", type=float, default=16.0)
    args = ap.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    with tempfile.TemporaryDirectory(prefix="lanewatch-bench-") as d:
        r = run_fleet_cost(sizes, args.seconds, args.warmup, Path(d))
    print(json.dumps({"results": r, "keys": flat_keys(r)}, indent=2))


if __name__ == "__main__":
    main()
