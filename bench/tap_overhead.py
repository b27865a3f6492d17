"""What the gateway's tap costs a stream, side by side with nginx and a direct connection.

One upstream (bench/sse_light.py: headers at once, first content chunk at 50 ms, then 40
more 10 ms apart) behind four paths: `direct` (the client talks to it), `nginx` (Debian's
nginx, `proxy_buffering off`, upstream keep-alive; bench/nginx.py), `pipe` (a bare byte pipe
on uvloop, bench/pipe_floor.py: what any Python proxy here costs at least), `tap` (`lanewatch gateway`
as deployed: shipping its tap records to a collector, here bench/records_sink.py, whose CPU is
counted apart); `--paths` adds `tap-metrics` (the gateway observing its request metrics
itself, without a collector), `tap-content` and `aiohttp`; `--peers N:PATH+...` adds peers
at some concurrencies only (bench/peer_paths.py: `envoy`, `envoy-2`, `litellm`, `litellm-lanewatch`,
`nginx-2`, `tap-2`).
At each concurrency the paths run in
interleaved rounds (the order rotates each round) so drift on the shared machine hits all
alike; within a round each path gets the same closed-loop load (bench/stream_client.py).

- added TTFT = a path's TTFT quantile − direct's in the same round; the median over the rounds
- added chunk delay = the same for each content chunk's one-way delay (upstream write → client read)
- pinned: the same at one concurrency with each proxy on a core of its own and the client,
  the upstream and the records sink on the others, as a gateway runs beside no load generator
- CPU per 1,000 chunks = the process's user + system seconds (/proc/<pid>/stat) over the
  content chunks the client received; given for the proxy (and its user part apart: the
  system part is the same read and write for every proxy), the upstream, the client and the
  records sink

Run alone: `python -m bench.tap_overhead [--streams 1,64,256,512] [--pinned 64] [--rounds 3] [--seconds 4]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanewatch.collector.record.window import quantile
from tests.integration.gateway_harness import start_gateway
from tests.servers import free_port, run_service

from .machine import cpu_s, cpu_split, pin
from .nginx import find_nginx, start_nginx
from .peer_paths import (
    COLLECTING,
    PEERS,
    SETTLE_S,
    SHIPPING,
    STAMPLESS,
    Unavailable,
    start_envoy_lanewatch,
    start_peer,
)
from .stream_client import LoadResult, close_all, open_connections, run_load

__all__ = [
    "TTFT_FIGURES",
    "TapBench",
    "flat_keys",
    "paired_diffs",
    "parse_peers",
    "run_tap_bench",
    "summarize_level",
]

ROOT = Path(__file__).resolve().parents[1]
FIRST_MS, GAP_MS, CHUNKS = 50.0, 10.0, 41


def _stream_s(chunks: int) -> float:
    """One answer's length with `chunks` content chunks: the stagger span of a level's streams."""
    return (FIRST_MS + GAP_MS * (chunks - 1)) / 1000


STREAM_S = _stream_s(CHUNKS)  # one response's length: the stagger span
PATHS = ("direct", "nginx", "pipe", "tap", "tap-rescue")
TTFT_FIGURES = ("ttft_p50_ms", "ttft_p99_ms")


@dataclass
class _Path:
    name: str
    url: str
    pids: Callable[[], list[int]]
    side_pids: Callable[[], list[int]] = lambda: []  # what it ships to (the records sink, a collector)
    sink_url: str | None = None  # that sink, whose GET /stats counts the records taken
    counters: Callable[[], dict[str, float]] | None = None  # read before and after each sample
    settle_s: float = 0.0  # after the load, before the readings: what it ships on a timer arrives

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


@dataclass
class _Sample:
    """One path's load in one round, with the CPU each process spent on it."""

    load: LoadResult
    proxy_cpu_s: float
    upstream_cpu_s: float
    client_cpu_s: float
    sink_cpu_s: float | None = None  # None: the path ships to no sink
    proxy_user_s: float = 0.0  # the user part of proxy_cpu_s
    counters: dict[str, float] = field(default_factory=dict)  # the path's counters' growth in the sample


@dataclass
class TapBench:
    """Every sample of every path at every concurrency."""

    samples: dict[str, dict[str, list[_Sample]]] = field(default_factory=dict)  # by level: "64", "64_pinned"
    unavailable: dict[str, str] = field(default_factory=dict)  # path → why it could not run here
    shipped: dict[str, int] = field(default_factory=dict)  # path → records its sink took (warm-ups too)


@contextmanager
def _process(tmp: Path, name: str, args: list[str], health: str = "/health") -> Iterator[tuple[str, int]]:
    """A helper process of the bench on a free port until the block exits: (URL, pid)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with run_service([*args, "--port", str(port)], tmp / f"{name}.log", url + health, cwd=ROOT) as proc:
        yield url, proc.pid


def _upstream(tmp: Path) -> AbstractContextManager[tuple[str, int]]:
    """bench/sse_light.py, the one upstream behind every path: (URL, pid)."""
    args = [sys.executable, "-m", "bench.sse_light", "--first-ms", str(FIRST_MS), "--gap-ms", str(GAP_MS)]
    return _process(tmp, "sse-light", [*args, "--chunks", str(CHUNKS)])


def _records_sink(tmp: Path) -> AbstractContextManager[tuple[str, int]]:
    """bench/records_sink.py, the collector's POST /v1/records without the collector: (URL, pid)."""
    return _process(tmp, "records-sink", [sys.executable, "-m", "bench.records_sink"])


@contextmanager
def _aiohttp_passthrough(tmp: Path, upstream: str) -> Iterator[_Path]:
    args = [sys.executable, str(ROOT / "bench" / "aiohttp_passthrough.py"), "--upstream", upstream]
    with _process(tmp, "aiohttp", args, health="/healthz") as (url, pid):
        yield _Path("aiohttp", url, lambda: [pid])


@contextmanager
def _pipe_floor(tmp: Path, upstream: str) -> Iterator[_Path]:
    args = [sys.executable, "-m", "bench.pipe_floor", "--upstream", upstream]
    with _process(tmp, "pipe", args) as (url, pid):
        yield _Path("pipe", url, lambda: [pid])


@contextmanager
def _paths(
    tmp: Path, names: Sequence[str], unavailable: dict[str, str] | None = None
) -> Iterator[tuple[list[_Path], int]]:
    """The upstream and every path in front of it: (paths, upstream pid). A peer that cannot run
    here is left out, its reason in `unavailable`."""
    with ExitStack() as stack:
        up_url, up_pid = stack.enter_context(_upstream(tmp))
        up_port = int(up_url.rsplit(":", 1)[1])
        paths: list[_Path] = []
        for name in names:
            if name == "direct":
                paths.append(_Path("direct", up_url, lambda: []))
            elif name == "nginx":
                binary = find_nginx()
                if binary is None:
                    raise RuntimeError(
                        "nginx not found: install Debian's nginx-light (make tools does, as root)"
                    )
                ng = stack.enter_context(start_nginx(binary, tmp / "nginx", free_port(), up_port))
                paths.append(_Path("nginx", ng.url, ng.pids))
            elif name == "tap":  # as deployed: records shipped to a collector
                sink_url, sink_pid = stack.enter_context(_records_sink(tmp))
                gw = stack.enter_context(start_gateway(tmp, [f"bench={up_url}"], "--collector", sink_url))
                pid = gw.process.pid
                paths.append(
                    _Path("tap", gw.url, lambda pid=pid: [pid], lambda sp=sink_pid: [sp], sink_url)  # type: ignore[misc]
                )
            elif name == "tap-rescue":  # as "tap", its requests on a lane the rescue watches (none is late)
                sink_url, sink_pid = stack.enter_context(_records_sink(tmp))
                lanes = [
                    f"fast={up_url}",
                    f"slow={up_url}",
                ]  # the default spec's lanes: slow's rescue is fast
                gw = stack.enter_context(
                    start_gateway(tmp, lanes, "--lane-order", "fast,slow", "--collector", sink_url)
                )
                pid = gw.process.pid
                paths.append(
                    _Path("tap-rescue", gw.url, lambda pid=pid: [pid], lambda sp=sink_pid: [sp], sink_url)  # type: ignore[misc]
                )
            elif name == "tap-metrics":  # no collector: the gateway observes its request metrics itself
                gw = stack.enter_context(start_gateway(tmp, [f"bench={up_url}"]))
                pid = gw.process.pid
                paths.append(_Path("tap-metrics", gw.url, lambda pid=pid: [pid]))  # type: ignore[misc]
            elif name == "tap-content":  # the gateway with the opt-in content recording
                gw = stack.enter_context(start_gateway(tmp, [f"bench={up_url}"], "--record-content"))
                pid = gw.process.pid
                paths.append(_Path("tap-content", gw.url, lambda pid=pid: [pid]))  # type: ignore[misc]
            elif name == "pipe":
                paths.append(stack.enter_context(_pipe_floor(tmp, up_url)))
            elif name == "aiohttp":
                paths.append(stack.enter_context(_aiohttp_passthrough(tmp, up_url)))
            elif name in PEERS:
                _add_peer(stack, tmp, name, up_url, paths, unavailable)
            else:
                raise ValueError(f"unknown path {name!r}")
        yield paths, up_pid


def _add_peer(
    stack: ExitStack,
    tmp: Path,
    name: str,
    up_url: str,
    paths: list[_Path],
    unavailable: dict[str, str] | None,
) -> None:
    if name in COLLECTING:  # Envoy and the collector it sends to, whose CPU is counted apart
        try:
            ev = start_envoy_lanewatch(stack, tmp, name, up_url)
        except Unavailable as e:
            if unavailable is None:
                raise
            unavailable[name] = str(e)
            return
        side = [ev.collector_pid]
        paths.append(_Path(name, ev.url, ev.pids, lambda: side, counters=ev.counters, settle_s=SETTLE_S))
        return
    sink: list[int] = []
    sink_url = None
    if name in SHIPPING:  # as deployed, like `tap`: its own records sink, counted apart
        sink_url, sink_pid = stack.enter_context(_records_sink(tmp))
        sink = [sink_pid]
    try:
        url, pids = start_peer(stack, tmp, name, up_url, sink_url)
    except Unavailable as e:
        if unavailable is None:
            raise
        unavailable[name] = str(e)
        return
    paths.append(_Path(name, url, pids, lambda: sink, sink_url))


async def _measure(
    path: _Path, conns: list[Any], seconds: float, up_pid: int, chunks: int = CHUNKS
) -> _Sample:
    me = os.getpid()
    pids, side = path.pids(), path.side_pids()
    counted = path.counters() if path.counters else {}  # outside the CPU readings: pages cost CPU too
    user0, sys0 = cpu_split(*pids)
    before = (cpu_s(up_pid), cpu_s(me), cpu_s(*side))
    load = await run_load(conns, seconds, _stream_s(chunks), chunks)
    if path.name in STAMPLESS:  # its events carry its own `created`, not the upstream's write time
        load.delay_us = []
    if path.settle_s:
        await asyncio.sleep(path.settle_s)
    after = (cpu_s(up_pid), cpu_s(me), cpu_s(*side))
    user1, sys1 = cpu_split(*pids)
    grown = {k: v - counted[k] for k, v in path.counters().items()} if path.counters else {}
    upstream, client, sink = (a - b for a, b in zip(after, before, strict=True))
    user = user1 - user0
    return _Sample(load, user + sys1 - sys0, upstream, client, sink if side else None, user, grown)


async def _level(
    paths: list[_Path],
    streams: int,
    rounds: int,
    seconds: float,
    up_pid: int,
    log: Callable[[str], None],
    chunks: int = CHUNKS,
) -> dict[str, list[_Sample]]:
    conns = {p.name: await open_connections(p.port, streams) for p in paths}
    span = _stream_s(chunks)
    try:
        for p in paths:  # warm-up: every connection's proxy opens its upstream connection, caches fill
            await run_load(conns[p.name], min(seconds, span * 2), span, chunks)
        settle = max((p.settle_s for p in paths), default=0.0)
        await asyncio.sleep(settle)  # what the warm-ups shipped on a timer is in before the first sample
        out: dict[str, list[_Sample]] = {p.name: [] for p in paths}
        for r in range(rounds):
            for p in paths[r % len(paths) :] + paths[: r % len(paths)]:
                s = await _measure(p, conns[p.name], seconds, up_pid, chunks)
                out[p.name].append(s)
                log(
                    f"  {streams:>4} streams  round {r + 1}  {p.name:<7} {s.load.requests:>5} requests"
                    f"  TTFT p50 {_ms(s.load.ttft_s, 0.5):7.2f} ms  {s.load.chunks_per_s:8.0f} chunks/s"
                    f"  errors {s.load.errors}"
                )
        return out
    finally:
        for c in conns.values():
            close_all(c)


def run_tap_bench(
    streams: Sequence[int],
    rounds: int,
    seconds: float,
    paths: Sequence[str] = PATHS,
    log: Callable[[str], None] = print,
    pinned: Sequence[int] = (),
    extra: Mapping[int, Sequence[str]] | None = None,
    chunks: int = CHUNKS,
    label: str = "",
) -> TapBench:
    """Measure every path at every concurrency, then at each of `pinned` with the proxies on a core
    of their own (level "<n>_pinned"; skipped on one core); processes are started and stopped here.
    `extra`: more paths (peers) measured at those concurrencies only, beside the others; `chunks`:
    each answer's content chunks (10 ms apart); `label` is appended to each level's name."""
    bench = TapBench()
    extra = extra or {}
    every = [*paths, *(p for n in sorted(extra) for p in extra[n] if p not in paths)]
    names = list(dict.fromkeys(every))
    with (
        tempfile.TemporaryDirectory(prefix="lanewatch-bench-") as d,
        _paths(Path(d), names, bench.unavailable) as (started_paths, up_pid),
    ):
        ps = [p for p in started_paths if p.name in paths]

        async def main() -> None:
            for n in sorted({*streams, *extra}):
                here = [p for p in started_paths if p.name in paths or p.name in extra.get(n, ())]
                if n not in streams:
                    here = [p for p in here if p.name == "direct" or p.name in extra.get(n, ())]
                bench.samples[f"{n}{label}"] = await _level(here, n, rounds, seconds, up_pid, log, chunks)
            cpus = sorted(os.sched_getaffinity(0))
            if pinned and len(cpus) < 2:
                log("  one core: no pinned level")
                return
            proxies = [pid for p in ps for pid in p.pids()]
            rest = [os.getpid(), up_pid, *(pid for p in ps for pid in p.side_pids())]
            for n in pinned:
                pin(proxies, {cpus[0]})
                pin(rest, set(cpus[1:]))
                try:
                    bench.samples[f"{n}_pinned"] = await _level(ps, n, rounds, seconds, up_pid, log)
                finally:
                    pin(proxies + rest, set(cpus))

        asyncio.run(main())
        bench.shipped = {p.name: _records_taken(p.sink_url) for p in started_paths if p.sink_url}
    return bench


def _records_taken(sink_url: str) -> int:
    """The records a records sink took (its GET /stats)."""
    with urllib.request.urlopen(f"{sink_url}/stats", timeout=10) as r:
        return int(json.loads(r.read())["records"])


def _ms(xs: Sequence[float], q: float) -> float:
    return quantile(sorted(xs), q) * 1e3 if xs else float("nan")


_QUANTILES = {"ttft_p50_ms": 0.5, "ttft_p99_ms": 0.99, "chunk_delay_p50_ms": 0.5, "chunk_delay_p99_ms": 0.99}


def _round_figures(s: _Sample) -> dict[str, float]:
    delays = sorted(d / 1e3 for d in s.load.delay_us)  # ms
    ttft = sorted(t * 1e3 for t in s.load.ttft_s)
    out = {}
    for key, q in _QUANTILES.items():
        xs = ttft if key.startswith("ttft") else delays
        out[key] = quantile(xs, q) if xs else float("nan")
    return out


def _path_figures(samples: list[_Sample]) -> dict[str, Any]:
    ttft = sorted(t * 1e3 for s in samples for t in s.load.ttft_s)
    chunks = sum(s.load.chunks for s in samples)
    per_1k = 1000 / chunks if chunks else float("nan")
    return {
        "requests": sum(s.load.requests for s in samples),
        "errors": sum(s.load.errors for s in samples),
        "chunks_per_s": sum(s.load.chunks_per_s for s in samples) / len(samples),
        "pooled_ttft_p50_ms": quantile(ttft, 0.5) if ttft else float("nan"),
        "pooled_ttft_p99_ms": quantile(ttft, 0.99) if ttft else float("nan"),
        "proxy_cpu_s_per_1k_chunks": sum(s.proxy_cpu_s for s in samples) * per_1k,
        "proxy_user_cpu_s_per_1k_chunks": sum(s.proxy_user_s for s in samples) * per_1k,
        "upstream_cpu_s_per_1k_chunks": sum(s.upstream_cpu_s for s in samples) * per_1k,
        "client_cpu_s_per_1k_chunks": sum(s.client_cpu_s for s in samples) * per_1k,
        "rounds": [_round_figures(s) for s in samples],
    } | _sink_figures(samples, per_1k)


def _sink_figures(samples: list[_Sample], per_1k: float) -> dict[str, float]:
    sink = [s.sink_cpu_s for s in samples if s.sink_cpu_s is not None]
    return {"sink_cpu_s_per_1k_chunks": sum(sink) * per_1k} if sink else {}


def paired_diffs(
    base: Sequence[Mapping[str, float]], on: Sequence[Mapping[str, float]], prefix: str
) -> dict[str, Any]:
    """Per TTFT quantile: one path's rounds minus another's, round by round (they ran in the same
    rounds, so load hits both alike); the median as `{prefix}_{key}`, the range beside it."""
    out: dict[str, Any] = {}
    for key in TTFT_FIGURES:
        diffs = [b[key] - a[key] for a, b in zip(base, on, strict=True)]
        out[f"{prefix}_{key}"] = statistics.median(diffs)
        out[f"{prefix}_{key}_range"] = [min(diffs), max(diffs)]
    return out


def summarize_level(samples: dict[str, list[_Sample]]) -> dict[str, dict[str, Any]]:
    """Per path: quantiles, throughput, CPU per 1k chunks, and what it adds over direct.

    Quantiles are taken per round; a path's added figure is its quantile minus direct's in
    the same round, and the figure reported is the median over the rounds (each round's
    in `rounds`): one round a neighbour's burst disturbed moves it little.
    """
    figures: dict[str, dict[str, Any]] = {name: _path_figures(s) for name, s in samples.items()}
    base = figures.get("direct")
    for name, f in figures.items():
        for key in _QUANTILES:
            f[key] = statistics.median(r[key] for r in f["rounds"])
        if base is None or name == "direct":
            continue
        for round_, direct in zip(f["rounds"], base["rounds"], strict=True):
            for key in _QUANTILES:
                round_[f"added_{key}"] = round_[key] - direct[key]
        for key in _QUANTILES:
            added = [r[f"added_{key}"] for r in f["rounds"]]
            f[f"added_{key}"] = statistics.median(added)
            f[f"added_{key}_range"] = [min(added), max(added)]
    return figures


def flat_keys(levels: dict[str, dict[str, dict[str, Any]]]) -> dict[str, float]:
    """The results.json keys: `<path>_<figure>_<streams>` and the tap-versus-nginx ratios."""
    out: dict[str, float] = {}
    names = {
        "added_ttft_p50_ms": "added_ttft_p50_ms", "added_ttft_p99_ms": "added_ttft_p99_ms",
        "added_chunk_delay_p50_ms": "added_chunk_delay_p50_ms",
        "added_chunk_delay_p99_ms": "added_chunk_delay_p99_ms",
        "proxy_cpu_s_per_1k_chunks": "cpu_s_per_1k_chunks", "chunks_per_s": "chunks_per_s",
        "proxy_user_cpu_s_per_1k_chunks": "user_cpu_s_per_1k_chunks",
        "sink_cpu_s_per_1k_chunks": "sink_cpu_s_per_1k_chunks",
        "ttft_p50_ms": "ttft_p50_ms", "ttft_p99_ms": "ttft_p99_ms",
    }  # fmt: skip
    for n, figures in levels.items():
        for path, f in figures.items():
            for src, dst in names.items():
                if src in f and not (path == "direct" and src.startswith("proxy_")):
                    out[f"{path}_{dst}_{n}"] = round(float(f[src]), 4)
        if "direct" in figures:  # the upstream alone, with no proxy beside it
            out[f"upstream_cpu_s_per_1k_chunks_{n}"] = round(
                figures["direct"]["upstream_cpu_s_per_1k_chunks"], 4
            )
        out |= _best_of_workers(figures, n)
        tap, ng, rescue = figures.get("tap"), figures.get("nginx"), figures.get("tap-rescue")
        if tap and rescue:  # what watching every request for a late first token costs, none being late
            out[f"tap_rescue_vs_tap_cpu_ratio_{n}"] = _ratio(
                rescue["proxy_cpu_s_per_1k_chunks"], tap["proxy_cpu_s_per_1k_chunks"]
            )
        if tap and ng:
            for key in ("added_ttft_p99_ms", "added_ttft_p50_ms"):
                q = key.split("_")[2]
                out[f"tap_vs_nginx_added_ttft_{q}_ratio_{n}"] = _ratio(tap[key], ng[key])
            out[f"tap_cpu_pct_of_core_{n}"] = round(
                tap["proxy_cpu_s_per_1k_chunks"] * tap["chunks_per_s"] / 10, 1
            )  # s per 1k chunks × chunks/s / 1000 × 100 %
            out[f"tap_vs_nginx_cpu_ratio_{n}"] = _ratio(
                tap["proxy_cpu_s_per_1k_chunks"], ng["proxy_cpu_s_per_1k_chunks"]
            )
            out[f"tap_vs_nginx_user_cpu_ratio_{n}"] = _ratio(
                tap["proxy_user_cpu_s_per_1k_chunks"], ng["proxy_user_cpu_s_per_1k_chunks"]
            )
    return out


def _best_of_workers(figures: Mapping[str, Mapping[str, Any]], n: str) -> dict[str, float]:
    """`<proxy>_best_added_ttft_p99_ms_<n>` (the lower of 1 and 2 workers) and `..._best_workers_<n>`."""
    out: dict[str, float] = {}
    for proxy in ("tap", "nginx"):
        got = [(float(figures[p]["added_ttft_p99_ms"]), w) for p, w in ((proxy, 1), (f"{proxy}-2", 2))
               if p in figures]  # fmt: skip
        if len(got) == 2:
            best, workers = min(got)
            out[f"{proxy}_best_added_ttft_p99_ms_{n}"] = round(best, 4)
            out[f"{proxy}_best_workers_{n}"] = workers
    return out


def _ratio(a: float, b: float) -> float:
    """a / b; +inf when b ≤ 0 (nginx added nothing measurable) and a > 0."""
    if b > 0:
        return round(a / b, 3)
    return 0.0 if a <= 0 else float("inf")


def parse_peers(text: str) -> dict[int, list[str]]:
    """`64:envoy+litellm,512:tap-2` → {64: ["envoy", "litellm"], 512: ["tap-2"]}; ValueError if bad."""
    out: dict[int, list[str]] = {}
    for part in filter(None, text.split(",")):
        n, sep, names = part.partition(":")
        if not sep or not n.isdigit() or not names:
            raise ValueError(f"--peers: {part!r} is not N:PATH[+PATH]")
        for name in names.split("+"):
            if name not in PEERS:
                raise ValueError(f"--peers: unknown path {name!r} (known: {', '.join(PEERS)})")
            out.setdefault(int(n), []).append(name)
    return out


def main() -> None:
    """Run the tap bench alone and print its figures as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", default="1,64,256,512")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--pinned", default="", help="levels to measure again, each proxy on a core of its own")
    ap.add_argument(
        "--paths", default=",".join(PATHS), help="direct,nginx,pipe,tap,tap-metrics[,tap-content,aiohttp]"
    )
    ap.add_argument(
        "--peers", default="", help=f"N:PATH+PATH,... measured at N streams only; paths: {','.join(PEERS)}"
    )
    args = ap.parse_args()
    bench = run_tap_bench(
        [int(s) for s in args.streams.split(",")],
        args.rounds,
        args.seconds,
        args.paths.split(","),
        log=lambda line: print(line, file=sys.stderr, flush=True),
        pinned=[int(s) for s in args.pinned.split(",") if s],
        extra=parse_peers(args.peers),
    )
    levels = {n: summarize_level(s) for n, s in bench.samples.items()}
    print(json.dumps({"levels": levels, "keys": flat_keys(levels)}, indent=1, default=str))


if __name__ == "__main__":
    main()
