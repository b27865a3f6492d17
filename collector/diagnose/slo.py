"""Each lane's latency SLO thresholds, from the goodput judge an SLO spec maps to. Pure."""

from __future__ import annotations

from lanewatch.collector.diagnose.evidence import SloTargets
from lanewatch.collector.record.goodput import Goodput

__all__ = ["slo_targets"]


def slo_targets(goodput: Goodput) -> dict[str, SloTargets]:
    """The lane-wide latency SLOs of each lane (an SLO with a selector covers part of a lane: left out)."""
    out: dict[str, SloTargets] = {}
    for lane, bounds in goodput.bounds.items():
        wide = {b.metric: b.threshold_s for b in bounds if not b.selector}
        out[lane] = SloTargets(
            ttft_s=wide.get("ttft"), tpot_s=wide.get("tpot"), itl_s=wide.get("itl"), e2e_s=wide.get("e2e")
        )
    return out
