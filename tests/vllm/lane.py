"""One lane in front of a real vLLM, measured as a user would: gateway tap, collector, Prometheus.

`measured_lane` runs `lanewatch collect --records FILE` (vLLM's spans reach it through the span
relay), `lanewatch gateway --upstream LANE=URL --collector ...` shipping its tap records there, and
a Prometheus scraping the engine's /metrics with the `lane` label the deploy config gives it.
The lane is handed over once Prometheus has scraped the engine twice (the baseline);
`diagnose` runs `lanewatch diagnose RECORDS --prometheus URL --lane LANE --json` over a window
from just before the first scrape, so rates and means cover the same samples.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from lanewatch.collector.diagnose.prometheus import PrometheusSource
from lanewatch.collector.diagnose.queries import LaneQueries
from lanewatch.collector.record.files import read_records
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.exporters import names
from tests.conftest import require_binary
from tests.integration.gateway_harness import start_gateway
from tests.layout import ROOT
from tests.servers import free_port, lanewatch_command, run_service, started, wait_http
from tests.waiting import eventually

from .relay import SpanRelay

# vLLM's gauges move each engine step and a burst lasts seconds; a scrape renders ~70 families in
# the engine's front-end process, so a lane that reads only counters scrapes less often.
SCRAPE_INTERVAL = "500ms"
WINDOW_MARGIN_S = 0.2  # the window starts this long before the first scrape was seen
JOIN_WAIT_S = 20.0  # vLLM batches its span exports (~5 s); the collector holds a record this long


@dataclass(frozen=True)
class MeasuredLane:
    """The gateway to send through, the records file the collector writes, the Prometheus that scrapes."""

    lane: str
    gateway_url: str
    records_path: Path
    prometheus_url: str
    prometheus_started: float  # monotonic, just before its first scrape of the engine

    def records(self) -> list[RequestTiming]:
        """The tap records the collector has written so far."""
        if not self.records_path.exists():
            return []
        return [r for r in read_records(self.records_path).records if r.source == "tap"]

    def window(self) -> str:
        """A Prometheus range from just before the first scrape: means and rates over the same samples."""
        return f"{math.ceil(time.monotonic() - self.prometheus_started)}s"


def _prometheus_args(tmp_path: Path, lane: str, vllm_url: str, port: int, every: str) -> list[str]:
    cfg = {
        "global": {"scrape_interval": every, "evaluation_interval": "1s"},
        "scrape_configs": [
            {
                "job_name": f"vllm-{lane}",
                "scrape_interval": every,
                "scrape_timeout": every,
                "static_configs": [
                    {"targets": [vllm_url.removeprefix("http://")], "labels": {"lane": lane, "target": lane}}
                ],
            }
        ],
    }
    folder = tmp_path / f"prometheus-{port}"
    folder.mkdir()
    (folder / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    return [
        require_binary("prometheus"),
        f"--config.file={folder / 'prometheus.yml'}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]


@contextmanager
def measured_lane(
    tmp_path: Path, lane: str, vllm_url: str, relay: SpanRelay, scrape_every: str = SCRAPE_INTERVAL
) -> Iterator[MeasuredLane]:
    """Collector, gateway and Prometheus for one lane over `vllm_url`, until the block exits."""
    config = {
        "gpu": {"enabled": False},
        "scrape": {"enabled": False},
        "probe": {"enabled": False},
        "otlp": {"join_wait_s": JOIN_WAIT_S},
    }
    cfg = tmp_path / f"collect-{lane}.yaml"
    cfg.write_text(json.dumps(config))
    port, prom_port = free_port(), free_port()
    records = tmp_path / f"records-{lane}.jsonl"
    collector = f"http://127.0.0.1:{port}"
    collect = [*lanewatch_command(), "collect", "-c", str(cfg), "--port", str(port)]
    collect += ["--records", str(records)]
    with ExitStack() as stack:
        stack.enter_context(run_service(collect, tmp_path / f"collect-{port}.log", f"{collector}/healthz"))
        stack.enter_context(relay.forwarding_to(f"{collector}/v1/traces"))
        gw = stack.enter_context(start_gateway(tmp_path, [f"{lane}={vllm_url}"], "--collector", collector))
        log = tmp_path / f"prometheus-{prom_port}.log"
        prom_args = _prometheus_args(tmp_path, lane, vllm_url, prom_port, scrape_every)
        proc = stack.enter_context(started(prom_args, log))
        prom = f"http://127.0.0.1:{prom_port}"
        wait_http(f"{prom}/-/ready", proc, lambda: log.read_text(errors="replace"), timeout_s=30)
        yield MeasuredLane(lane, gw.url, records, prom, _baseline(prom, lane))


def _scrapes(prom: str, lane: str) -> int:
    """How many times this Prometheus has scraped the lane's engine."""
    r = httpx.get(f"{prom}/api/v1/query", params={"query": f'count_over_time(up{{lane="{lane}"}}[1h])'})
    result = r.json()["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


def _baseline(prom: str, lane: str) -> float:
    """Wait for two scrapes (the counters' baseline, before any traffic); when the first was, monotonic.

    Prometheus applies new targets at most every 5 s, so its first scrape comes seconds after it
    is ready: a window from then would start mid-workload, and rates would extrapolate from there.
    """

    def first_seen() -> float:
        return time.monotonic() if _scrapes(prom, lane) >= 1 else 0.0  # 0.0: not yet

    first = eventually(first_seen, 30, "a first scrape", every_s=0.1)
    eventually(lambda: _scrapes(prom, lane) >= 2, 30, "a second scrape", every_s=0.1)
    return first - WINDOW_MARGIN_S


def diagnose(m: MeasuredLane, slo_spec: Path | None = None) -> dict[str, Any]:
    """`lanewatch diagnose` over the lane's records and its Prometheus (and `slo_spec`): the JSON document."""
    args = ["diagnose", str(m.records_path), "--prometheus", m.prometheus_url, "--lane", m.lane]
    args += ["--window", m.window(), "--json"]
    if slo_spec is not None:
        args += ["--slo-spec", str(slo_spec)]
    done = subprocess.run([*lanewatch_command(), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def bucket_at_most(seconds: float) -> float:
    """The largest latency bucket bound at most `seconds` (an SLO threshold must be one)."""
    return max((b for b in names.LATENCY_BUCKETS if b <= seconds), default=names.LATENCY_BUCKETS[0])


def ttft_spec(folder: Path, lane: str, threshold_s: float) -> Path:
    """The bundled SLO spec with `lane`'s TTFT objective and alert at `threshold_s`, written to `folder`.

    Tests that need a breach (or its absence) set the SLO from what they measured on this machine,
    never from an assumed engine speed.
    """
    spec = yaml.safe_load((ROOT / "alerts" / "slos.yaml").read_text())
    for slo in spec["spec"]["slos"]:
        if slo["name"] == "ttft" and slo["lanes"] == [lane]:
            slo["latency"]["threshold"] = threshold_s
    for alert in spec["spec"]["alerts"]["latency"]:
        if alert["metric"] == "ttft" and alert["lanes"] == [lane]:
            alert["limit"] = threshold_s
    path = folder / f"slos-{lane}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def first_token_s(url: str, body: dict[str, object]) -> float:
    """Seconds from sending a streamed completion straight to the engine to its first data chunk."""
    began, took = time.monotonic(), None
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=300) as r:
        r.raise_for_status()
        for line in r.iter_lines():  # read to the end: the engine is idle again after
            if took is None and line.startswith("data: {"):
                took = time.monotonic() - began
    assert took is not None, "no data chunk"
    return took


def findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The one diagnosed lane's results, ranked (findings first)."""
    lanes = doc["lanes"]
    assert len(lanes) == 1, lanes
    out: list[dict[str, Any]] = lanes[0]["findings"]
    return out


def evidence(finding: dict[str, Any], signal: str) -> dict[str, Any]:
    """One signal of a finding's evidence, by name."""
    found: list[dict[str, Any]] = [e for e in finding["evidence"] if e["signal"] == signal]
    assert found, (signal, finding["evidence"])
    return found[0]


def prefix_hit_rate(m: MeasuredLane) -> float | None:
    """The lane's prefix-cache hit rate over the Prometheus's lifetime, as the diagnosis queries it."""
    prom = PrometheusSource(m.prometheus_url)
    try:
        q = LaneQueries(m.lane, m.window())
        rate = prom.scalar(q.ratio(names.VLLM_PREFIX_CACHE_HITS_TOTAL, names.VLLM_PREFIX_CACHE_QUERIES_TOTAL))
    finally:
        prom.close()
    return rate.value if rate is not None else None
