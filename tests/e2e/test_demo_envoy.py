"""`lanewatch demo --router envoy` as a user runs it, a real process with real Envoy, Prometheus
and Alertmanager on 127.0.0.1: the fault pages, the controller's envoy adapter rewrites Envoy's
route file, Envoy moves the slow lane's traffic to the fast lane, and the restore moves it back.
The records come from Envoy's access log (source `envoy`, lane = the upstream cluster that
served it), so they show where Envoy sent each request. The run takes about two minutes here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require_binary
from tests.e2e.router_demo import run_router_demo

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]


def test_demo_through_envoy_tells_the_whole_story_and_envoy_moves_the_traffic(tmp_path: Path) -> None:
    for name in ("prometheus", "prometheus-alertmanager", "envoy"):
        require_binary(name)
    demo = run_router_demo("envoy", tmp_path / "out")
    summary, records = demo.summary, demo.records
    assert {r["source"] for r in records} == {"probe", "envoy"}  # no gateway in the path
    envoy = [r for r in records if r["source"] == "envoy" and r["status"] == 200]
    before, during, after = demo.slow_routed(envoy)
    assert before and during and after, (len(before), len(during), len(after))
    # Envoy's upstream cluster: the slow lane's requests went to the fast lane while shifted, and back.
    assert all(r["lane"] == "fast" for r in during), [r["lane"] for r in during]
    assert all(r["lane"] == "slow" for r in before + after)
    assert all(r["model"] == "lanewatch-demo-big" for r in envoy)  # both lanes answer one name
    # The access-log records join the simulators' spans: queue, prefill, decode from the engine.
    joined = [r for r in envoy if r["phases_source"] == "span"]
    assert len(joined) >= 0.9 * len(envoy), (len(joined), len(envoy))
    assert summary["lanes"]["fast"]["by_source"].get("envoy") and summary["lanes"]["slow"]["by_source"].get(
        "envoy"
    )
