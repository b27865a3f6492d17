"""What the collector costs: parsing a vLLM-sized /metrics page, and `lanewatch collect` itself
at 10 probes/s with 10 scraped targets.

The page is the simulator's (`lanewatch sim` renders vLLM V1's names, labels and buckets:
~450 lines, ~45 kB), fetched after some traffic so its histograms hold counts. Parse cost is
collector/collect/scrape.py's own path (`parse_metrics`: drop the lines lanewatch does not read,
then prometheus_client's parser), timed in this process; fetch + parse is `scrape_once`
over loopback.

The collector runs as users run it (a subprocess with a config file) against two simulator
processes (few, so their Python does not starve the collector of the shared cores): ten
targets alternate between them, each probed once a second with the `short` class (12
words in, 16 tokens out) and scraped once a second, and the simulators send their OTLP
spans to the collector, which joins them to the probes. CPU is the process's user + system
seconds over the window (/proc/<pid>/stat); RSS is read from /proc/<pid>/status.

Run alone: `python -m bench.collector_cost [--seconds 20]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from lanewatch.collector.collect.scrape import parse_metrics, relevant_chunks, scrape_once
from lanewatch.collector.record.window import summarize
from tests.servers import SimHandle, free_port, lanewatch_command, start_simulator

from .machine import cpu_s, rss_mb

__all__ = ["collector_process", "collector_totals", "run_collector_cost", "totals_of"]

TARGETS = 10
SIMS = 2


def _ms(values: list[float]) -> dict[str, float]:
    s = summarize(values)
    assert s is not None
    return {"p50": round(s.p50 * 1e3, 3), "p99": round(s.p99 * 1e3, 3), "mean": round(s.mean * 1e3, 3)}


def parse_cost(text: str, repeats: int) -> dict[str, Any]:
    """Time collector/collect/scrape.py's parse of one page, `repeats` times."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        parse_metrics(text)
        times.append(time.perf_counter() - t0)
    lines = text.count("\n")
    kept = sum(chunk.count("\n") for chunk in relevant_chunks(text))
    return {
        "page_lines": lines,
        "page_bytes": len(text.encode()),
        "lines_parsed": kept,
        "parse_ms": _ms(times),
    }


async def _fetch_parse(url: str, repeats: int) -> dict[str, float]:
    times = []
    async with httpx.AsyncClient() as client:
        for _ in range(repeats):
            snap = await scrape_once(client, "sim", "fast", url, 5.0)
            assert snap.up, snap.error
            times.append(snap.duration_s)
    return _ms(times)


def _config(sims: list[SimHandle]) -> dict[str, Any]:
    targets = [
        {"name": f"t{i}", "url": sims[i % len(sims)].url, "lane": "fast", "model": sims[i % len(sims)].model}
        for i in range(TARGETS)
    ]
    return {
        "targets": targets,
        "probe": {
            "interval_s": 1.0,
            "classes": [{"name": "short", "prompt_words": 12, "max_tokens": 16}],
        },
        "scrape": {"interval_s": 1.0},
        "gpu": {"enabled": False},
    }


@contextmanager
def collector_process(tmp: Path, cfg: dict[str, Any], port: int) -> Iterator[subprocess.Popen[bytes]]:
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "collect.yaml"
    path.write_text(yaml.safe_dump(cfg))
    log = (tmp / "collect.log").open("wb")
    args = [*lanewatch_command(), "collect", "-c", str(path), "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"lanewatch collect exited:\n{(tmp / 'collect.log').read_text()}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("lanewatch collect did not come up in 20 s")
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def collector_totals(port: int) -> dict[str, float]:
    """Counts off the collector's /metrics: probes, scrapes up, spans joined."""
    return totals_of(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)


def totals_of(text: str) -> dict[str, float]:
    """Counts off a collector /metrics page: probes, scrapes up, spans joined."""
    out = {"requests": 0.0, "errors": 0.0, "scrape_up": 0.0, "joined": 0.0}
    prefixes = {
        "lanewatch_requests_total{": "requests",
        "lanewatch_request_errors_total{": "errors",
        "lanewatch_scrape_up{": "scrape_up",
        "lanewatch_otlp_spans_joined_total ": "joined",
    }
    for line in text.splitlines():
        for prefix, key in prefixes.items():
            if line.startswith(prefix):
                out[key] += float(line.rsplit(" ", 1)[1])
    return out


def run_collector_cost(seconds: float, warmup_s: float, repeats: int, tmp: Path) -> dict[str, Any]:
    """The parse cost, then the collector process over a `seconds` window."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with ExitStack() as stack:
        sims = [
            stack.enter_context(
                start_simulator(tmp / f"sim{i}", otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces")
            )
            for i in range(SIMS)
        ]
        proc = stack.enter_context(collector_process(tmp, _config(sims), port))
        time.sleep(warmup_s)
        before, cpu0, t0 = collector_totals(port), cpu_s(proc.pid), time.monotonic()
        rss_samples = []
        while time.monotonic() - t0 < seconds:
            time.sleep(min(1.0, seconds))
            rss_samples.append(rss_mb(proc.pid)[0])
        cpu, elapsed, after = cpu_s(proc.pid) - cpu0, time.monotonic() - t0, collector_totals(port)
        rss_now, rss_peak = rss_mb(proc.pid)
        page = httpx.get(f"{sims[0].url}/metrics", timeout=5).text
        fetch = asyncio.run(_fetch_parse(f"{sims[0].url}/metrics", max(repeats // 4, 1)))
    probes = after["requests"] - before["requests"]
    return {
        "parse": {**parse_cost(page, repeats), "fetch_parse_ms": fetch},
        "collector": {
            "targets": TARGETS,
            "simulators": SIMS,
            "window_s": round(elapsed, 1),
            "probes_per_s": round(probes / elapsed, 2),
            "probe_errors": after["errors"] - before["errors"],
            "targets_up": after["scrape_up"],
            "spans_joined_per_s": round((after["joined"] - before["joined"]) / elapsed, 2),
            "cpu_percent": round(100 * cpu / elapsed, 2),
            "cpu_ms_per_probe": round(1e3 * cpu / probes, 2) if probes else None,
            "rss_mb": round(rss_now, 1),
            "rss_max_in_window_mb": round(max(rss_samples), 1),
            "rss_peak_mb": round(rss_peak, 1),
        },
    }


def flat_keys(r: dict[str, Any]) -> dict[str, float]:
    """The results.json keys of this part."""
    p, c = r["parse"], r["collector"]
    return {
        "scrape_parse_ms_p50": p["parse_ms"]["p50"],
        "scrape_parse_ms_p99": p["parse_ms"]["p99"],
        "scrape_fetch_parse_ms_p50": p["fetch_parse_ms"]["p50"],
        "metrics_page_lines": p["page_lines"],
        "collector_probes_per_s": c["probes_per_s"],
        "collector_cpu_percent": c["cpu_percent"],
        "collector_rss_mb": c["rss_mb"],
        "collector_rss_peak_mb": c["rss_peak_mb"],
    }


def main() -> None:
    """Run this part alone and print its JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanewatch-bench-") as d:
        r = run_collector_cost(args.seconds, args.warmup, args.repeats, Path(d))
    print(json.dumps({"results": r, "keys": flat_keys(r)}, indent=2))


if __name__ == "__main__":
    main()
