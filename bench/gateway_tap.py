"""What the gateway's tap costs: lanewatch gateway vs a bare aiohttp pass-through, side by side.

Upstream (tests/sse_upstream.py): headers at once, the first content chunk at 50 ms, then
40 more every 10 ms (../shared/reference/performance.md). Paths, interleaved in every
round: direct (no proxy), aiohttp pass-through (bench/aiohttp_passthrough.py), lanewatch
gateway. The client is a lean raw-socket one (a keep-alive connection per stream), so its
own CPU disturbs the proxies as little as it can on a shared 2-core machine.

- added TTFT = a path's TTFT quantile minus direct's in the same round
- CPU = the proxy process's user+system seconds (/proc) per 1,000 SSE events delivered
- ITL = per gap, client arrival gaps against the upstream's own write gaps (same clock)

`--content` adds a fourth path, the gateway with `--record-content` (the tap decodes every
event for its text), to price the opt-in against the default.

Run: `.venv/bin/python bench/gateway_tap.py [--rounds 3] [--streams 1,64] [--seconds 6] [--content]`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lanewatch.collector.window import quantile  # noqa: E402
from tests.integration.gateway_harness import _stop, _wait_up, start_gateway, start_test_upstream  # noqa: E402
from tests.servers import free_port  # noqa: E402

BODY = json.dumps(
    {"model": "m", "stream": True, "max_tokens": 41, "messages": [{"role": "user", "content": "hi"}]}
)
MARK = b'"content":"t'
COLUMNS = (
    "streams", "round", "path", "requests", "TTFT p50 / p99 ms", "added p50 / p99 ms",
    "proxy CPU s / 1k events", "ITL err p50 / p99 ms", "ITL p99 down − up ms",
)  # fmt: skip


@contextmanager
def passthrough(tmp: Path, upstream: str) -> Iterator[tuple[str, int]]:
    """The aiohttp pass-through proxy as a subprocess: (url, pid)."""
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


@dataclass
class _Result:
    ttft: list[float] = field(default_factory=list)
    events: int = 0
    streams: list[tuple[str, list[float]]] = field(
        default_factory=list
    )  # (request id, content arrival times)


class _Conn(asyncio.Protocol):
    """One keep-alive client connection; stamps content chunks of the response in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] | None = None
        self.times: list[float] = []
        self.events = 0
        self.tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        n = data.count(MARK)
        if n:
            self.times += [now] * n
        self.events += data.count(b"data: ")
        self.tail = (self.tail + data)[-8:]
        if self.tail.endswith(b"\r\n0\r\n\r\n") and self.done is not None and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError("closed"))


async def _worker(port: int, until: float, out: _Result, tag: str) -> None:
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(_Conn, "127.0.0.1", port)
    n = 0
    while time.perf_counter() < until:
        rid = f"{tag}-{n}"
        n += 1
        conn.times, conn.events, conn.tail = [], 0, b""
        conn.done = loop.create_future()
        head = "\r\n".join(
            ["POST /v1/chat/completions HTTP/1.1", "Host: b", "Content-Type: application/json"]
        )
        head += f"\r\nX-Request-Id: {rid}"
        assert conn.transport is not None
        t0 = time.perf_counter()
        conn.transport.write(f"{head}\r\nContent-Length: {len(BODY)}\r\n\r\n{BODY}".encode())
        await asyncio.wait_for(conn.done, 30)
        out.ttft.append(conn.times[0] - t0)
        out.events += conn.events
        out.streams.append((rid, conn.times))
    assert conn.transport is not None
    conn.transport.close()


async def load(url: str, streams: int, seconds: float, tag: str) -> _Result:
    """`streams` closed-loop clients for `seconds`."""
    port = int(url.rsplit(":", 1)[1])
    out = _Result()
    until = time.perf_counter() + seconds
    await asyncio.gather(*(_worker(port, until, out, f"{tag}-{i}") for i in range(streams)))
    return out


def itl_errors(
    upstream: str, streams: list[tuple[str, list[float]]]
) -> tuple[list[float], list[float], list[float]]:
    """Per gap |down - up| and both ends' gaps, the upstream's from its own write log."""
    errors, down, up = [], [], []
    for rid, times in streams:
        with urllib.request.urlopen(f"{upstream}/debug/requests/{rid}", timeout=5) as r:
            writes = json.load(r)["writes"]
        d = [b - a for a, b in itertools.pairwise(times)]
        u = [b - a for a, b in itertools.pairwise(writes)]
        if len(d) != len(u):
            continue
        down += d
        up += u
        errors += [abs(a - b) for a, b in zip(d, u, strict=True)]
    return errors, down, up


def _ms(xs: list[float], q: float) -> float:
    return quantile(sorted(xs), q) * 1e3


def measure(
    up: str, name: str, url: str, pid: int | None, streams: int, seconds: float, tag: str
) -> dict[str, float]:
    """One path at one concurrency: TTFT quantiles, proxy CPU per 1,000 events, ITL fidelity."""
    before = cpu_s(pid) if pid else 0.0
    res = asyncio.run(load(url, streams, seconds, tag))
    cpu = (cpu_s(pid) - before) if pid else float("nan")
    errors, down, upg = itl_errors(up, res.streams)
    return {
        "requests": len(res.ttft),
        "ttft_p50": _ms(res.ttft, 0.5),
        "ttft_p99": _ms(res.ttft, 0.99),
        "cpu_per_1k": cpu / res.events * 1000,
        "itl_err_p50": _ms(errors, 0.5),
        "itl_err_p99": _ms(errors, 0.99),
        "itl_p99_diff": _ms(down, 0.99) - _ms(upg, 0.99),
    }


def main() -> None:
    """Run the rounds and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", default="1,64")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--content", action="store_true", help="also the gateway with --record-content")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as d, ExitStack() as stack:
        tmp = Path(d)
        up = stack.enter_context(start_test_upstream(tmp, first_ms=50, gap_ms=10))
        pt_url, pt_pid = stack.enter_context(passthrough(tmp, up))
        gw = stack.enter_context(start_gateway(tmp, [f"slow={up}"]))
        paths = {"direct": (up, None), "aiohttp": (pt_url, pt_pid), "gateway": (gw.url, gw.process.pid)}
        if args.content:
            gwc = stack.enter_context(start_gateway(tmp, [f"slow={up}"], "--record-content"))
            paths["gateway+content"] = (gwc.url, gwc.process.pid)
        print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
        for streams in (int(s) for s in args.streams.split(",")):
            for name, (url, _pid) in paths.items():
                asyncio.run(load(url, streams, 0.5, f"warm-{name}-{streams}"))
            for rnd in range(1, args.rounds + 1):
                base: dict[str, float] = {}
                for name, (url, pid) in paths.items():
                    m = measure(up, name, url, pid, streams, args.seconds, f"{name}-{streams}-{rnd}")
                    base = base or m
                    added = (
                        f"{m['ttft_p50'] - base['ttft_p50']:+.2f} / {m['ttft_p99'] - base['ttft_p99']:+.2f}"
                    )
                    cells = [
                        str(streams), str(rnd), name, f"{m['requests']:.0f}",
                        f"{m['ttft_p50']:.2f} / {m['ttft_p99']:.2f}", added if pid else "—",
                        f"{m['cpu_per_1k']:.3f}" if pid else "—",
                        f"{m['itl_err_p50']:.2f} / {m['itl_err_p99']:.2f}", f"{m['itl_p99_diff']:+.2f}",
                    ]  # fmt: skip
                    print("| " + " | ".join(cells) + " |", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
