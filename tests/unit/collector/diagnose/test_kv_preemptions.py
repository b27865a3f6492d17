"""Preemptions mean the KV cache ran out, though its usage averaged over the window sits below 0.9
(it falls each time requests finish), as the simulator's over-full slow lane shows."""

from __future__ import annotations

from dataclasses import replace

from lanewatch.collector.diagnose import diagnose, top_findings
from lanewatch.collector.diagnose.evidence import Value
from tests.unit.collector.diagnose.build import HEALTHY_SERVER, Shape, window


def test_preemptions_with_mean_usage_under_the_limit_are_kv_memory() -> None:
    server = replace(
        HEALTHY_SERVER, waiting=Value(4, "q"), kv_usage=Value(0.85, "q"), preemptions_per_s=Value(0.2, "q")
    )
    found = top_findings(diagnose(window(Shape(queue=1.5), server)))
    assert [f.check for f in found] == ["queue/kv-memory"]


def test_waiting_under_the_usage_limit_without_preemptions_is_not_kv_memory() -> None:
    server = replace(HEALTHY_SERVER, waiting=Value(4, "q"), kv_usage=Value(0.85, "q"))
    found = top_findings(diagnose(window(Shape(queue=1.5), server)))
    assert "queue/kv-memory" not in [f.check for f in found]
