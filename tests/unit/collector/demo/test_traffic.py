"""The traffic's pure parts: Poisson gaps, the class mix, routing expectations, the shift share."""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter

import pytest

from lanewatch.collector.demo.traffic import MIX, Served, Traffic, next_arrival, pick_class, routed_lane


def test_arrival_gaps_are_exponential_with_the_rate() -> None:
    rng = random.Random(1)
    gaps = [next_arrival(rng, 4.0) for _ in range(20_000)]
    assert statistics.fmean(gaps) == pytest.approx(0.25, rel=0.03)
    assert statistics.pstdev(gaps) == pytest.approx(0.25, rel=0.05)  # exponential: sd == mean
    assert min(gaps) >= 0


def test_classes_follow_their_weights_and_the_seed() -> None:
    rng = random.Random(3)
    drawn = Counter(pick_class(rng, MIX).name for _ in range(20_000))
    for cls in MIX:
        assert drawn[cls.name] / 20_000 == pytest.approx(cls.weight, abs=0.02)
    a, b = random.Random(9), random.Random(9)
    assert [pick_class(a, MIX).name for _ in range(50)] == [pick_class(b, MIX).name for _ in range(50)]


def test_the_three_probe_classes_short_goes_fast_the_rest_slow() -> None:
    assert [c.name for c in MIX] == ["short", "summary", "story"]
    assert [routed_lane(c) for c in MIX] == ["fast", "slow", "slow"]
    assert sum(c.weight for c in MIX) == pytest.approx(1.0)


def test_shifted_share_counts_recent_slow_routed_answers() -> None:
    t = Traffic("http://127.0.0.1:1", "m", 1.0, recent_s=10.0)
    now = time.time()
    t.recent.extend(
        [
            Served(now - 30, "story", "slow", "slow", "", 200),  # too old
            Served(now - 2, "story", "slow", "fast", "shift", 200),
            Served(now - 1, "summary", "slow", "fast", "shift", 200),
            Served(now - 1, "summary", "slow", "slow", "", 200),
            Served(now - 1, "short", "fast", "fast", "", 200),  # routed fast: not counted
            Served(now - 1, "story", "slow", "?", "", 502),  # failed: not counted
        ]
    )
    share, n = t.shifted_share("slow", "fast") or (0.0, 0)
    assert (round(share, 3), n) == (0.667, 3)
    assert len(t.recent) == 5
    assert Traffic("http://x", "m", 1.0).shifted_share("slow", "fast") is None
