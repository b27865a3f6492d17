"""The traffic's pure parts: Poisson gaps, the class mix, routing expectations, the shift share."""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter

import pytest

from lanewatch.collector.demo.traffic import (
    MIX,
    Noise,
    Served,
    Traffic,
    next_arrival,
    noise_of,
    pick_class,
    routed_lane,
)


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


def test_noise_draws_each_manner_at_its_share_and_none_without_it() -> None:
    rng = random.Random(5)
    noise = Noise(non_streamed=0.5, slow_upload=0.1, disconnect=0.05, upload_s=1.5)
    drawn = [noise_of(rng, noise) for _ in range(20_000)]
    assert sum(not m.stream for m in drawn) / 20_000 == pytest.approx(0.5, abs=0.02)
    assert sum(m.upload_s == 1.5 for m in drawn) / 20_000 == pytest.approx(0.1, abs=0.01)
    assert sum(m.leave_after_s is not None for m in drawn) / 20_000 == pytest.approx(0.05, abs=0.01)
    assert not any(m.upload_s and m.leave_after_s is not None for m in drawn)  # one manner at most
    quiet = [noise_of(rng, Noise()) for _ in range(1000)]
    assert all(m.stream and not m.upload_s and m.leave_after_s is None for m in quiet)


@pytest.mark.parametrize(
    "bad", [{"non_streamed": 1.5}, {"slow_upload": -0.1}, {"slow_upload": 0.6, "disconnect": 0.6}]
)
def test_noise_refuses_shares_outside_zero_to_one(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="noise shares"):
        Noise(**bad)
