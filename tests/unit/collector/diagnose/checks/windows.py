"""Windows the checks' cases share: a full KV cache, full compute, decode stalls, a lane pair."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from lanewatch.collector.diagnose import (
    LaneEvidence,
    LaneStats,
    SloTargets,
    Value,
    Window,
    lanes_from_records,
)
from tests.unit.collector.diagnose.build import HEALTHY_SERVER, SLO, Shape, records

KV_FULL = replace(
    HEALTHY_SERVER, waiting=Value(6, "q"), kv_usage=Value(0.96, "q"), preemptions_per_s=Value(0.4, "q")
)
COMPUTE_FULL = replace(HEALTHY_SERVER, waiting=Value(6, "q"), kv_usage=Value(0.5, "q"))
STALLS = Shape(stall_s=0.5, stall_every=1, long_prompt_every=2)


def pair(fast: Shape, slow: Shape) -> Window:
    lanes = {
        **lanes_from_records(records(fast, lane="fast"), {"fast": SLO}, server={"fast": HEALTHY_SERVER}),
        **lanes_from_records(records(slow, lane="slow"), {"slow": SloTargets(ttft_s=2.0, tpot_s=0.05)}),
    }
    return Window(lanes, pairs=(("fast", "slow"),))


def no_itl() -> Window:
    stats = LaneStats(requests=100, ok_requests=100)
    return Window({"slow": LaneEvidence("slow", stats, HEALTHY_SERVER, SLO)})


def empty() -> Window:
    return Window({"slow": LaneEvidence("slow", LaneStats(), HEALTHY_SERVER, SLO)})


# check id -> (a window it finds in, one it passes, one it cannot judge, the series the unknown names)
Case = tuple[Callable[[], Window], Callable[[], Window], Callable[[], Window], str]
