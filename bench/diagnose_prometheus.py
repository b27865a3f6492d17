"""`lanewatch diagnose --prometheus` over one window for two lanes: what one diagnosis costs there.

A real Prometheus holds 12 minutes of recorded data, backfilled with `promtool tsdb
create-blocks-from openmetrics` (deterministic, no waiting for scrapes): lanewatch's request
series as its exporter writes them (exporters/request_metrics.py fed records, one page per 15 s
scrape) and vLLM's series for each lane's server; the slow lane is queue-bound on KV memory.
The command runs as users run it (a subprocess, `--json`, both lanes, `--window 10m`); the
figures are its CPU seconds (start and imports included), Prometheus's CPU seconds over the
same call, and their sum, the goal's figure (wall seconds on a shared machine are noise).

Run alone: `python -m bench.diagnose_prometheus`.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from lanewatch.exporters import names
from lanewatch.exporters.request_metrics import RequestMetrics
from tests.servers import free_port
from tests.unit.collector.diagnose.build import Shape, records

__all__ = ["flat_keys", "openmetrics", "run_diagnose_prometheus"]

SLOW = Shape(queue=2.5, stall_s=0.3, stall_every=7, long_prompt_every=5, error_every=40)
STEP_S, STEPS, PER_STEP = 15, 48, 12  # a page per 15 s over 12 minutes; 12 requests per lane per step
STEP_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
COMMAND = [sys.executable, "-c", "from lanewatch.collector.cli import main; main()"]
READY_TIMEOUT_S = 60.0

Series = dict[str, dict[str, list[tuple[int, float]]]]  # name -> labels text -> (unix s, value)


def find_tools() -> tuple[str, str] | None:
    """Debian's prometheus and promtool binaries, or None."""
    prom, tool = shutil.which("prometheus"), shutil.which("promtool")
    return (prom, tool) if prom and tool else None


def _vllm(lane: str, step: int, slow: bool) -> Iterator[tuple[str, str, float]]:
    """One scrape of a lane's vLLM server: (name, labels, value)."""
    sel = f'{names.LANE}="{lane}",model_name="m"'
    done = step * PER_STEP
    yield names.VLLM_NUM_REQUESTS_RUNNING, sel, 8.0 if slow else 3.0
    yield names.VLLM_NUM_REQUESTS_WAITING, sel, 6.0 if slow else 0.0
    yield names.VLLM_KV_CACHE_USAGE_PERC, sel, 0.95 if slow else 0.3
    yield names.VLLM_NUM_PREEMPTIONS_TOTAL, sel, float(step * 2 if slow else 0)
    yield names.VLLM_PREFIX_CACHE_QUERIES_TOTAL, sel, float(done * 400)
    yield names.VLLM_PREFIX_CACHE_HITS_TOTAL, sel, float(done * 240)
    yield names.VLLM_REQUEST_SUCCESS_TOTAL, sel + ',finished_reason="stop"', float(done)
    yield names.VLLM_CACHE_CONFIG_INFO, sel + ',enable_prefix_caching="True"', 1.0
    steps = step * 60  # engine steps so far, each of about 200 tokens
    for le in STEP_BUCKETS:
        yield (
            names.VLLM_ITERATION_TOKENS_TOTAL + "_bucket",
            f'{sel},le="{le:.1f}"',
            float(steps if le >= 256 else 0),
        )
    yield names.VLLM_ITERATION_TOKENS_TOTAL + "_bucket", f'{sel},le="+Inf"', float(steps)
    yield names.VLLM_ITERATION_TOKENS_TOTAL + "_sum", sel, float(steps * 200)
    yield names.VLLM_ITERATION_TOKENS_TOTAL + "_count", sel, float(steps)


def _page_samples(text: str) -> Iterator[tuple[str, str, float]]:
    """A Prometheus text page's samples: (name, labels, value)."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, brace, labels = head.partition("{")
        yield name, labels[:-1] if brace else "", float(value)


def recorded_series(end_s: int) -> Series:
    """STEPS scrapes ending at end_s: lanewatch's pages from records, and each lane's vLLM series."""
    metrics = RequestMetrics(None)
    series: Series = {}
    for step in range(STEPS):
        at = end_s - (STEPS - 1 - step) * STEP_S
        start = float(at - STEP_S)
        for r in records(SLOW, n=PER_STEP, lane="slow", start=start):
            metrics.observe(r)
        for r in records(Shape(), n=PER_STEP, lane="fast", start=start):
            metrics.observe(r)
        samples = [
            *_page_samples(metrics.exposition()),
            *_vllm("slow", step, True),
            *_vllm("fast", step, False),
        ]
        for name, labels, value in samples:
            series.setdefault(name, {}).setdefault(labels, []).append((at, value))
    return series


def openmetrics(series: Series) -> str:
    """The series as OpenMetrics text for promtool: one `unknown` family per name, samples in time order."""
    out: list[str] = []
    for name in sorted(series):
        out.append(f"# TYPE {name} unknown")
        for labels, points in sorted(series[name].items()):
            sel = f"{{{labels}}}" if labels else ""
            out.extend(f"{name}{sel} {value!r} {at}" for at, value in points)
    out.append("# EOF")
    return "\n".join(out) + "\n"


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / _CLK_TCK


_CLK_TCK = float(os.sysconf("SC_CLK_TCK"))


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited {proc.returncode} before it was ready")
        try:
            if httpx.get(f"{url}/-/ready", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)  # polling a starting server, bounded by the deadline
    raise RuntimeError(f"prometheus not ready within {READY_TIMEOUT_S:.0f} s")


def run_diagnose_prometheus(tmp: Path) -> dict[str, Any]:
    """Backfill a Prometheus, then time `lanewatch diagnose --prometheus URL --lane fast --lane slow`."""
    tools = find_tools()
    if tools is None:
        raise RuntimeError("prometheus and promtool are needed (Debian's prometheus package)")
    prom, promtool = tools
    tmp.mkdir(parents=True, exist_ok=True)
    data, text = tmp / "tsdb", tmp / "window.om"
    text.write_text(openmetrics(recorded_series(int(time.time()) - 5)))
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(text), str(data)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    config = tmp / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\n")
    url = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [prom, f"--config.file={config}", f"--storage.tsdb.path={data}",
         f"--web.listen-address={url.removeprefix('http://')}", "--storage.tsdb.retention.time=1d"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_ready(url, proc)
        load = [round(x, 2) for x in os.getloadavg()]  # the machine may be shared: say how busy it was
        prom0, cpu0, wall0 = _proc_cpu_s(proc.pid), _children_cpu_s(), time.monotonic()
        done = subprocess.run(
            [*COMMAND, "diagnose", "--prometheus", url, "--lane", "fast", "--lane", "slow",
             "--window", "10m", "--json"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        wall, cpu = time.monotonic() - wall0, _children_cpu_s() - cpu0
        prom_cpu = _proc_cpu_s(proc.pid) - prom0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"lanewatch diagnose exited {done.returncode}: {done.stderr[-2000:]}")
    doc = json.loads(done.stdout)
    return {
        "lanes": 2,
        "window": "10m",
        "series": sum(len(v) for v in recorded_series_shape(text)),
        "cpu_s": round(cpu + prom_cpu, 2),
        "lanewatch_cpu_s": round(cpu, 2),
        "prometheus_cpu_s": round(prom_cpu, 2),
        "wall_s": round(wall, 2),
        "found": doc["found"],
        "top": _top(doc),
        "load_avg": load,
    }


def recorded_series_shape(text: Path) -> list[set[str]]:
    """The distinct series per family in the OpenMetrics file (how much Prometheus holds)."""
    families: dict[str, set[str]] = {}
    for line in text.read_text().splitlines():
        if line.startswith("#"):
            continue
        key = line.rpartition(" ")[0].rpartition(" ")[0]
        families.setdefault(key.partition("{")[0], set()).add(key)
    return list(families.values())


def _top(doc: dict[str, Any]) -> str | None:
    for lane in doc.get("lanes", []):
        for f in lane.get("findings", []):
            if f.get("verdict") == "finding":
                return f"{lane.get('lane')}: {f.get('check')}"
    return None


def flat_keys(r: dict[str, Any]) -> dict[str, float | None]:
    """The results.json keys of this part."""
    return {"diagnose_prometheus_cpu_s": r["cpu_s"], "diagnose_prometheus_wall_s": r["wall_s"]}


def main() -> None:
    """Run this part alone and print its JSON."""
    with tempfile.TemporaryDirectory(prefix="lanewatch-bench-") as d:
        r = run_diagnose_prometheus(Path(d))
    print(json.dumps({"results": r, "keys": flat_keys(r)}, indent=2))


if __name__ == "__main__":
    main()
