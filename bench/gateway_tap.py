"""What the gateway's tap costs: lanewatch gateway vs a bare aiohttp pass-through, side by side.

Upstream (tests/sse_upstream.py): headers at once, the first content chunk at 50 ms, then
40 more every 10 ms (../shared/reference/performance.md). Paths, interleaved per round:
direct (no proxy), aiohttp pass-through (bench/aiohttp_passthrough.py), lanewatch gateway.
Added TTFT = a path's TTFT quantile minus direct's in the same round; CPU = the proxy
process's user+system seconds (/proc) per 1,000 SSE events delivered.

Run: `.venv/bin/python bench/gateway_tap.py [--rounds 3] [--streams 1,64]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lanewatch.collector.window import quantile  # noqa: E402
from tests.integration.gateway_harness import _stop, _wait_up, start_gateway, start_test_upstream  # noqa: E402
from tests.servers import free_port  # noqa: E402

BODY = {"model": "m", "stream": True, "max_tokens": 41, "messages": [{"role": "user", "content": "hi"}]}


@contextmanager
def passthrough(tmp: Path, upstream: str) -> Iterator[tuple[str, int]]:
    """The aiohttp pass-through proxy as a subprocess: (url, pid)."""
    import subprocess

    port = free_port()
    log = tmp / f"passthrough-{port}.log"
    args = [
        sys.executable,
        str(ROOT / "bench" / "aiohttp_passthrough.py"),
        "--port",
        str(port),
        "--upstream",
        upstream,
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_up(proc, f"http://127.0.0.1:{port}/healthz", log)
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        _stop(proc)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one(session: aiohttp.ClientSession, url: str) -> tuple[float, int]:
    """TTFT of one streamed request and the SSE events it delivered."""
    t0 = time.perf_counter()
    ttft, events = None, 0
    async with session.post(url + "/v1/chat/completions", json=BODY) as r:
        buf = b""
        async for data in r.content.iter_any():
            buf += data
            parts = buf.split(b"\n\n")
            buf = parts.pop()
            for ev in parts:
                events += 1
                if ttft is None and b'"content":"t' in ev:
                    ttft = time.perf_counter() - t0
    assert ttft is not None
    return ttft, events


async def load(url: str, streams: int, requests: int) -> tuple[list[float], int]:
    """`requests` streams, `streams` at a time; TTFTs and events delivered."""
    sem = asyncio.Semaphore(streams)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def limited() -> tuple[float, int]:
            async with sem:
                return await one(session, url)

        results = await asyncio.gather(*(limited() for _ in range(requests)))
    return [r[0] for r in results], sum(r[1] for r in results)


def main() -> None:
    """Run the rounds and print a table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", default="1,64")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d, ExitStack() as stack:
        tmp = Path(d)
        up = stack.enter_context(start_test_upstream(tmp, first_ms=50, gap_ms=10))
        pt_url, pt_pid = stack.enter_context(passthrough(tmp, up))
        gw = stack.enter_context(start_gateway(tmp, [f"slow={up}"]))
        paths = {"direct": (up, None), "aiohttp": (pt_url, pt_pid), "gateway": (gw.url, gw.process.pid)}
        print("| streams | round | path | TTFT p50 / p99 ms | added p50 / p99 ms | proxy CPU s / 1k events |")
        print("|---|---|---|---|---|---|")
        for streams in (int(s) for s in args.streams.split(",")):
            requests = 20 if streams == 1 else 2 * streams
            for url, _pid in paths.values():
                asyncio.run(load(url, streams, streams))  # open the proxies' upstream connections
            for rnd in range(1, args.rounds + 1):
                base: tuple[float, float] | None = None
                for name, (url, pid) in paths.items():
                    before = cpu_s(pid) if pid else 0.0
                    ttfts, events = asyncio.run(load(url, streams, requests))
                    cpu = (cpu_s(pid) - before) if pid else 0.0
                    xs = sorted(ttfts)
                    p50, p99 = quantile(xs, 0.5) * 1e3, quantile(xs, 0.99) * 1e3
                    base = base or (p50, p99)
                    added = f"{p50 - base[0]:+.2f} / {p99 - base[1]:+.2f}" if name != "direct" else "—"
                    per_k = f"{cpu / events * 1000:.3f}" if pid else "—"
                    print(
                        f"| {streams} | {rnd} | {name} | {p50:.2f} / {p99:.2f} | {added} | {per_k} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
