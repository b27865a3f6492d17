"""CPU per probe: `lanewatch collect` against Prometheus' blackbox_exporter, side by side.

Both probe the simulator's streamed chat endpoint (`lanewatch sim`, fast profile) with the
same request: the `short` class's POST body (12 words in, 16 tokens out, `stream: true`,
usage on). The collector runs as users run it (a subprocess with a config file): ten
targets on the one simulator, each probed once a second, scrapes off (their cost is the
parse figure's), and the simulator sends its OTLP spans to the collector, which joins them
to the probes. Its figure is the whole probe: timing, SSE parsing, the client span, the
span's receipt and the join, the window and the metrics. blackbox_exporter (Debian's
`prometheus-blackbox-exporter`) gets the same ten probes a second on its `/probe`, sent by
this process as Prometheus would send them; its figure includes its own `/probe` handling.
Each side's CPU is its process's user + system seconds over the window (/proc/<pid>/stat),
divided by the probes that succeeded in it. The two windows run one after the other.

Run alone: `python -m bench.probe_cost [--seconds 20]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from lanewatch.collector.probe.prober import PATHS, spec_for
from lanewatch.collector.probe.settings import RequestClass, Target
from tests.servers import free_port, run_service, start_simulator

from .collector_cost import collector_process, collector_totals
from .machine import cpu_split, rss_mb

__all__ = ["find_blackbox", "flat_keys", "run_probe_cost"]

TARGETS = 10
RATE = 10.0  # probes per second, each side
SHORT = RequestClass(name="short", prompt_words=12, max_tokens=16)
BLACKBOX_NAMES = ("prometheus-blackbox-exporter", "blackbox_exporter")


def find_blackbox() -> str | None:
    """The blackbox_exporter binary (Debian names it prometheus-blackbox-exporter); None if absent."""
    for name in BLACKBOX_NAMES:
        if path := shutil.which(name):
            return path
    return None


def blackbox_module(body: bytes) -> dict[str, Any]:
    """A blackbox http module that POSTs `body` and reads the stream to its `[DONE]`."""
    return {
        "prober": "http",
        "timeout": "10s",
        "http": {
            "method": "POST",
            "headers": {"Content-Type": "application/json", "Accept": "text/event-stream"},
            "body": body.decode(),
            "valid_status_codes": [200],
            "preferred_ip_protocol": "ip4",
            "fail_if_body_not_matches_regexp": [r"data: \[DONE\]"],
        },
    }


def _collector_config(url: str, model: str) -> dict[str, Any]:
    return {
        "targets": [{"name": f"t{i}", "url": url, "model": model} for i in range(TARGETS)],
        "probe": {
            "interval_s": TARGETS / RATE,
            "classes": [SHORT.model_dump(include={"name", "prompt_words", "max_tokens"})],
        },
        "scrape": {"enabled": False},
        "gpu": {"enabled": False},
    }


def _lanewatch_side(
    tmp: Path, url: str, model: str, port: int, seconds: float, warmup_s: float
) -> dict[str, Any]:
    with collector_process(tmp, _collector_config(url, model), port) as proc:
        time.sleep(warmup_s)
        before, cpu0, t0 = collector_totals(port), cpu_split(proc.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, elapsed, after = cpu_split(proc.pid), time.monotonic() - t0, collector_totals(port)
        rss = rss_mb(proc.pid)[0]
    user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    cpu = user + system
    probes = after["requests"] - before["requests"]
    errors = after["errors"] - before["errors"]
    ok = probes - errors
    return {
        "window_s": round(elapsed, 1),
        "probes": int(probes),
        "errors": int(errors),
        "spans_joined": int(after["joined"] - before["joined"]),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_probe": round(1e3 * cpu / ok, 3) if ok else None,
        "user_ms_per_probe": round(1e3 * user / ok, 3) if ok else None,
        "rss_mb": round(rss, 1),
    }


@contextmanager
def _blackbox(tmp: Path, binary: str, body: bytes) -> Iterator[tuple[int, int]]:
    """blackbox_exporter on a free port with the module `lanewatch`; yields (pid, port)."""
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "blackbox.yml"
    cfg.write_text(yaml.safe_dump({"modules": {"lanewatch": blackbox_module(body)}}))
    port = free_port()
    args = [binary, f"--config.file={cfg}", f"--web.listen-address=127.0.0.1:{port}"]
    with run_service(args, tmp / "blackbox.log", f"http://127.0.0.1:{port}/-/healthy") as proc:
        yield proc.pid, port


async def _drive_blackbox(port: int, target: str, seconds: float) -> tuple[int, int]:
    """Ask blackbox for `RATE` probes a second over `seconds`; (succeeded, failed)."""
    params = {"module": "lanewatch", "target": target}
    counts = [0, 0]

    async def one(client: httpx.AsyncClient) -> None:
        r = await client.get(f"http://127.0.0.1:{port}/probe", params=params, timeout=15)
        counts[0 if "\nprobe_success 1" in r.text else 1] += 1

    async with httpx.AsyncClient() as client:
        tasks = []
        start = time.monotonic()
        for i in range(round(seconds * RATE)):
            await asyncio.sleep(max(0.0, start + i / RATE - time.monotonic()))
            tasks.append(asyncio.create_task(one(client)))
        await asyncio.gather(*tasks)
    return counts[0], counts[1]


def _blackbox_side(
    tmp: Path, binary: str, url: str, model: str, seconds: float, warmup_s: float
) -> dict[str, Any]:
    target = Target(name="t0", url=url, model=model)
    spec = spec_for(SHORT, target)
    with _blackbox(tmp, binary, spec.body(model)) as (pid, port):
        endpoint = url + PATHS[spec.api]
        asyncio.run(_drive_blackbox(port, endpoint, warmup_s))
        cpu0, t0 = cpu_split(pid), time.monotonic()
        ok, failed = asyncio.run(_drive_blackbox(port, endpoint, seconds))
        cpu1, elapsed = cpu_split(pid), time.monotonic() - t0
        rss = rss_mb(pid)[0]
    user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    cpu = user + system
    return {
        "window_s": round(elapsed, 1),
        "probes": ok + failed,
        "errors": failed,
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_probe": round(1e3 * cpu / ok, 3) if ok else None,
        "user_ms_per_probe": round(1e3 * user / ok, 3) if ok else None,
        "rss_mb": round(rss, 1),
    }


def run_probe_cost(seconds: float, warmup_s: float, tmp: Path) -> dict[str, Any]:
    """lanewatch's window, then blackbox_exporter's, against one simulator."""
    tmp.mkdir(parents=True, exist_ok=True)
    binary = find_blackbox()
    port = free_port()
    with start_simulator(tmp / "sim", otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces") as sim:
        lanewatch = _lanewatch_side(tmp / "lanewatch", sim.url, sim.model, port, seconds, warmup_s)
        blackbox = (
            _blackbox_side(tmp / "blackbox", binary, sim.url, sim.model, seconds, warmup_s)
            if binary is not None
            else None
        )
    return {"rate_per_s": RATE, "targets": TARGETS, "lanewatch": lanewatch, "blackbox": blackbox}


def flat_keys(r: dict[str, Any]) -> dict[str, float | None]:
    """The results.json keys of this part."""
    bb = r["blackbox"]
    return {
        "probe_cpu_ms_per_probe": r["lanewatch"]["cpu_ms_per_probe"],
        "blackbox_cpu_ms_per_probe": bb["cpu_ms_per_probe"] if bb is not None else None,
    }


def main() -> None:
    """Run this part alone and print its JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=4.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanewatch-bench-") as d:
        r = run_probe_cost(args.seconds, args.warmup, Path(d))
    print(json.dumps({"results": r, "keys": flat_keys(r)}, indent=2))


if __name__ == "__main__":
    main()
