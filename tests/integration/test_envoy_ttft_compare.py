"""One stream seen three ways: the prober -> Envoy -> lanewatch gateway -> simulator, on loopback.

Each probe's trace id is kept by Envoy (its span is a child of the probe's) and by the gateway,
so the prober's record, Envoy's access-log record and the gateway tap's record of the same
request meet in the collector by trace id. Every TTFT is from that hop's own start:
- prober: request start to the first content chunk it read;
- Envoy: the request body's last byte (DS_RX_END) to the first upstream body byte (US_RX_BODY_BEG);
- tap: the gateway receiving the request to the first content chunk from the simulator.
The test checks what must hold whatever the load (the prober's window holds Envoy's) and
writes the percentiles to `envoy-ttft.json` in its folder and to stdout (docs/envoy-tap.md
quotes a run).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from lanewatch.collector.record.files import read_records
from lanewatch.collector.record.timing import RequestTiming
from tests.envoy import access_log_bootstrap, start_envoy
from tests.integration.gateway_harness import start_gateway
from tests.servers import free_port, lanewatch_command, run_service, start_simulator
from tests.waiting import eventually

pytestmark = pytest.mark.integration

PROBES = 40


def by_trace(path: Path) -> dict[str, dict[str, RequestTiming]]:
    """Records with a trace id, grouped: trace id -> source -> record."""
    out: dict[str, dict[str, RequestTiming]] = {}
    for r in read_records(path).records if path.exists() else []:
        if r.trace_id is not None and r.ttft_s is not None and r.ok:
            out.setdefault(r.trace_id, {})[r.source] = r
    return out


def ms(values: list[float], q: int = 50) -> float:
    """The q-th percentile of seconds, in milliseconds."""
    cut = (
        statistics.quantiles(values, n=100, method="inclusive")[q - 1]
        if q != 50
        else statistics.median(values)
    )
    return round(cut * 1000, 2)


def complete(path: Path) -> list[dict[str, RequestTiming]]:
    return [g for g in by_trace(path).values() if {"probe", "envoy", "tap"} <= set(g)]


def collect_args(tmp_path: Path, envoy_url: str, model: str, http_port: int) -> list[str]:
    """`lanewatch collect` probing through Envoy, receiving its access log and the gateway's records."""
    target = {"name": "envoy", "url": envoy_url, "lane": "fast", "model": model, "scrape": False}
    short = {"name": "short", "prompt_words": 16, "max_tokens": 8}
    config = {
        "targets": [target],
        "probe": {"interval_s": 0.25, "classes": [short]},
        "gpu": {"enabled": False},
    }
    path = tmp_path / "collect.yaml"
    path.write_text(json.dumps(config))
    records = str(tmp_path / "records.jsonl")
    return [*lanewatch_command(), "collect", "-c", str(path), "--port", str(http_port), "--records", records]


def test_envoy_ttft_against_the_gateway_taps_and_the_probers_on_the_same_streams(tmp_path: Path) -> None:
    http_port = free_port()
    records = tmp_path / "records.jsonl"
    collector_url = f"http://127.0.0.1:{http_port}"
    with (
        start_simulator(tmp_path) as sim,
        start_gateway(tmp_path, [f"fast={sim.url}"], "--collector", collector_url) as gateway,
    ):
        gw_port = int(gateway.url.rsplit(":", 1)[1])
        with start_envoy(
            tmp_path, access_log_bootstrap({"fast": gw_port, "slow": gw_port}, http_port)
        ) as envoy:
            args = collect_args(tmp_path, envoy.url, sim.model, http_port)
            with run_service(args, tmp_path / "collect.log", f"{collector_url}/healthz"):
                eventually(lambda: len(complete(records)) >= PROBES, 90, f"{PROBES} probes seen by all three")
    groups = complete(records)
    ttft = {src: [g[src].ttft_s or 0.0 for g in groups] for src in ("probe", "envoy", "tap")}
    for g in groups:
        probe, env, tap = (g[s].ttft_s or 0.0 for s in ("probe", "envoy", "tap"))
        assert probe + 0.0005 >= env > 0  # Envoy's window (µs) lies inside the prober's
        assert tap > 0
    result = {
        "requests": len(groups),
        "ttft_p50_ms": {src: ms(v) for src, v in ttft.items()},
        "ttft_p99_ms": {src: ms(v, 99) for src, v in ttft.items()},
        "ttfb_p50_ms": {src: ms([g[src].ttfb_s or 0.0 for g in groups]) for src in ttft},
        "e2e_p50_ms": {src: ms([g[src].e2e_s or 0.0 for g in groups]) for src in ttft},
        "probe_minus_envoy_ttft_p50_ms": ms(
            [p - e for p, e in zip(ttft["probe"], ttft["envoy"], strict=True)]
        ),
        "envoy_minus_tap_ttft_p50_ms": ms([e - t for e, t in zip(ttft["envoy"], ttft["tap"], strict=True)]),
        "envoy_before_tap_share": sum(e < t for e, t in zip(ttft["envoy"], ttft["tap"], strict=True))
        / len(groups),
    }
    (tmp_path / "envoy-ttft.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
