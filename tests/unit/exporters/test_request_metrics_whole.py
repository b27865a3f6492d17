"""RequestMetrics takes a record whole or not at all: one it cannot count (a value no float holds, gap
totals with no gap to spread) raises before any family moved, and the next record counts as usual."""

from __future__ import annotations

import dataclasses

import pytest

from lanewatch.collector.record.goodput import Bound, Goodput
from lanewatch.collector.record.itl import ItlStats
from lanewatch.exporters.request_metrics import RequestMetrics
from tests.unit.collector.record.test_batch import tap


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"output_tokens": 10**400}, OverflowError),  # past every other family it feeds
        ({"prompt_tokens": 10**400}, OverflowError),
        ({"cached_prompt_tokens": 10**400, "prompt_tokens": 10**401}, OverflowError),
        ({"itl_s": (), "itl_stats": ItlStats(5, 0.1, 0.01, 0.05)}, ZeroDivisionError),
    ],
)
def test_a_record_that_cannot_be_counted_moves_no_family(changes: dict[str, object], error: type) -> None:
    goodput = Goodput({lane: (Bound("ttft", 1.0),) for lane in ("fast", "slow")})  # tap's routed lane: slow
    metrics = RequestMetrics(None, goodput=goodput)
    metrics.observe(tap(0))
    before = metrics.exposition()
    bad = dataclasses.replace(tap(1), **changes)  # type: ignore[arg-type]
    with pytest.raises(error):
        metrics.observe(bad)
    assert metrics.exposition() == before
    metrics.observe(tap(2))
    assert metrics.exposition() != before
    assert 'lanewatch_requests_total{lane="fast",model="m",request_class="interactive",source="tap",' in (
        metrics.exposition()
    )


def test_a_sampled_record_spreads_its_exact_count_over_its_sample() -> None:
    metrics = RequestMetrics(None)
    metrics.observe(tap(0, itl_s=(0.004, 0.2), itl_stats=ItlStats(5, 0.5, 0.004, 0.2)))
    lines = [line for line in metrics.exposition().splitlines() if line.startswith("lanewatch_itl_seconds")]
    count = next(line for line in lines if "_count" in line)
    total = next(line for line in lines if "_sum" in line)
    assert count.endswith(" 5.0") and total.endswith(" 0.5")
    first = next(line for line in lines if 'le="0.005"' in line)
    assert first.endswith(" 3.0")  # the first of two stands for 3 of the 5 gaps


def test_a_won_rescue_counts_the_late_lanes_wait_for_it_and_the_served_lanes_own_ttft() -> None:
    metrics = RequestMetrics(None, lanes=["fast", "slow"])
    won = dataclasses.replace(
        tap(0, ttft_s=1.9), lane="fast", late_lane="slow", rescue_sent_s=1.75, late_wait_s=2.1
    )
    metrics.observe(won)
    text = metrics.exposition()

    def ttft(lane: str, le: str) -> str:
        return next(
            line.rsplit(" ", 1)[1]
            for line in text.splitlines()
            if line.startswith("lanewatch_ttft_seconds_bucket")
            and f'lane="{lane}"' in line
            and f'le="{le}"' in line
        )

    assert ttft("fast", "0.25") == "1.0"  # 0.15 s from when the fast attempt was sent
    assert ttft("slow", "2.0") == "0.0" and ttft("slow", "2.5") == "1.0"  # the slow lane missed its 2 s
    assert (
        'lanewatch_ttft_seconds_count{lane="slow",model="m",request_class="interactive",source="tap",target="slow"}'
        in text
    )
