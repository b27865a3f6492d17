"""`lanewatch diagnose --prometheus` against a real Prometheus 2.42 scraping a collector and a simulator.

The collector probes the simulator's slow lane and joins vLLM's spans, Prometheus scrapes both at
1 s, and the diagnosis names the slow lane's queue as its top finding, with the queries that show
it. Under the demo's fault (every request delayed ahead of the scheduler) vLLM shows no waiting
requests, so the cause stays unsplit; with one sequence at a time and eight probes in flight,
requests wait in vLLM's own queue while the KV cache has room: compute-bound.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.diagnose_matrix import PROMETHEUS_SCENARIOS
from tests.prometheus import job, start_prometheus
from tests.servers import free_port, lanewatch_command, start_simulator, started
from tests.waiting import eventually

pytestmark = pytest.mark.integration

FOUND_WITHIN_S = 90.0  # ~10 s of probes at ~3 per second make the 20 requests a verdict needs


def _diagnose(prometheus: str, expected: str) -> dict[str, Any] | None:
    args = ["diagnose", "--prometheus", prometheus, "--lane", "slow", "--window", "1m", "--json"]
    done = subprocess.run([*lanewatch_command(), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    if done.returncode != 1:
        return None
    print("top finding so far:", doc["lanes"][0]["findings"][0]["check"])
    return doc if doc["lanes"][0]["findings"][0]["check"] == expected else None


@pytest.mark.parametrize("name", list(PROMETHEUS_SCENARIOS))
def test_the_slow_lanes_cause_is_the_top_finding(tmp_path: Path, name: str) -> None:
    sc = PROMETHEUS_SCENARIOS[name]
    sim_flags, expected = dict(sc.sim), sc.expected
    collector_port = free_port()
    traces = f"http://127.0.0.1:{collector_port}/v1/traces"
    with start_simulator(tmp_path, profile="slow", otlp_endpoint=traces, **sim_flags) as sim:
        cfg = tmp_path / "collect.yaml"
        cfg.write_text(
            yaml.safe_dump(
                {
                    "targets": [{"name": "sim-slow", "url": sim.url, "lane": "slow", "model": sim.model}],
                    "probe": {"interval_s": 0.2, "concurrency": sc.concurrency, "classes": list(sc.classes)},
                    "scrape": {"interval_s": 1.0},
                    "gpu": {"enabled": False},
                }
            )
        )
        collect = [*lanewatch_command(), "collect", "-c", str(cfg), "--port", str(collector_port)]
        jobs = [
            job("lanewatch-collector", [f"127.0.0.1:{collector_port}"]),
            job("vllm-slow", [sim.url.removeprefix("http://")], {"lane": "slow", "target": "sim-slow"}),
        ]
        with started(collect, tmp_path / "collect.log"), start_prometheus(tmp_path, jobs) as base:
            doc = eventually(
                lambda: _diagnose(base, expected),
                FOUND_WITHIN_S,
                f"{expected} for the slow lane",
                every_s=2.0,
            )
            began = time.monotonic()
            _diagnose(base, expected)
            print(f"one diagnosis from Prometheus: {time.monotonic() - began:.2f} s, process start included")
    assert doc is not None
    assert doc["schema"] == "lanewatch.diagnose/v1" and doc["window"] == "1m"
    top = doc["lanes"][0]["findings"][0]
    print(f"top finding {top['check']}: {top['summary']}")
    assert top["verdict"] == "finding"
    assert top["check"] == expected, top
    sources = " ".join(s["source"] for s in top["evidence"])
    assert '{lane="slow"}[1m]' in sources  # the queries are shown
    if expected.startswith("queue/"):
        assert top["explains"]["of"] == "ttft" and top["explains"]["share"] > 0.5
        assert 'lanewatch_phase_seconds_sum{lane="slow"}[1m]' in sources
        assert 'vllm:num_requests_waiting{lane="slow"}[1m]' in sources  # and vLLM's
