from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lanewatch.collector.record.timing import ErrorKind, RequestTiming
from lanewatch.collector.record.window import (
    Window,
    coefficient_of_variation,
    convergence_ratio,
    fit_fixed_per_token,
    flatness,
    quantile,
    record_value,
    summarize,
)


def _r(lane: str = "fast", cls: str = "short", ttft: float | None = 0.1, e2e: float = 1.0, out: int = 10,
       error: ErrorKind | None = None) -> RequestTiming:  # fmt: skip
    return RequestTiming(
        source="probe", target="t", lane=lane, request_class=cls, model="m",
        ttft_s=ttft, e2e_s=e2e, output_tokens=out, error=error, itl_s=(0.01, 0.03),
    )  # fmt: skip


@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=200),
       st.sampled_from([0.5, 0.9, 0.95, 0.99]))  # fmt: skip
def test_quantile_matches_statistics_inclusive(values: list[float], q: float) -> None:
    xs = sorted(values)
    if len(xs) == 1:
        assert quantile(xs, q) == xs[0]
        return
    expected = statistics.quantiles(xs, n=100, method="inclusive")[round(q * 100) - 1]
    assert quantile(xs, q) == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_summarize() -> None:
    s = summarize([3.0, 1.0, 2.0, 4.0])
    assert s is not None
    assert (s.count, s.mean, s.p50, s.min, s.max) == (4, 2.5, 2.5, 1.0, 4.0)
    assert summarize([]) is None


def test_cv_and_flatness() -> None:
    assert coefficient_of_variation([2.0, 2.0, 2.0]) == 0.0
    assert coefficient_of_variation([1.0]) is None
    assert coefficient_of_variation([1.0, 3.0]) == pytest.approx(0.5)
    flat = flatness({"short": 2.0, "story": 2.1, "summary": 1.9})
    steep = flatness({"short": 0.2, "story": 5.0})
    assert flat is not None and flat < 0.1
    assert steep is not None and steep > 0.5


def test_fit_recovers_fixed_and_per_token() -> None:
    tokens = [16, 64, 256, 16, 64, 256]
    e2e = [0.3 + 0.02 * t for t in tokens]
    fit = fit_fixed_per_token(tokens, e2e)
    assert fit is not None
    assert fit.fixed_s == pytest.approx(0.3)
    assert fit.per_token_s == pytest.approx(0.02)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.fixed_share == pytest.approx(0.3 / (sum(e2e) / len(e2e)))
    assert fit_fixed_per_token([5, 5], [1.0, 2.0]) is None


def test_convergence_ratio() -> None:
    assert convergence_ratio(0.4, 2.0) == pytest.approx(0.2)
    assert convergence_ratio(None, 2.0) is None
    assert convergence_ratio(0.4, 0.0) is None


def test_window_expires_and_groups() -> None:
    w = Window(window_s=10)
    w.add(_r(ttft=0.1), now=0)
    w.add(_r(ttft=0.3), now=5)
    w.add(_r(lane="slow", ttft=2.0), now=5)
    w.add(_r(error=ErrorKind.STALL, ttft=None), now=6)
    groups = {g.key: g for g in w.groups(now=8)}
    fast = groups[("t", "fast", "short")]
    assert fast.requests == 3 and fast.errors == 1
    assert fast.metrics["ttft"].count == 2
    assert fast.metrics["itl"].count == 4
    assert math.isclose(sum(fast.breakdown_mean.values()), 1.0)
    assert len(w.records(now=14)) == 3  # the first record fell out of the window
    p99 = w.lane_p99_ttft(now=14)
    assert p99 == {"fast": 0.3, "slow": 2.0}


def test_window_flatness_and_fit_by_lane() -> None:
    w = Window()
    for cls, out, e2e in [("short", 16, 2.0), ("story", 256, 2.05), ("summary", 64, 1.95)]:
        w.add(_r(cls=cls, out=out, e2e=e2e), now=0)
    assert w.flatness_by_lane(now=1)["fast"] < 0.1
    fit = w.fit_by_lane(now=1)["fast"]
    assert fit.fixed_share > 0.9


def test_records_leave_as_time_passes_even_when_nobody_reads() -> None:
    w = Window(window_s=10)
    for t in range(1000):  # 1000 s of one record a second, never scraped
        w.add(_r(ttft=0.1), now=float(t))
    assert len(w) == 11  # only the last window's records are held


def test_a_rescued_request_counts_for_each_lane_its_own_attempts_ttft() -> None:
    won = RequestTiming(
        source="tap", target="f", lane="fast", request_class="c", model="m", status=200, ttft_s=1.9,
        e2e_s=2.5, late_lane="slow", rescue_sent_s=1.75, late_wait_s=2.1,
    )  # fmt: skip
    assert won.own_ttft_s == pytest.approx(0.15) and won.late_ttft == ("slow", 2.1)
    lost = RequestTiming(
        source="tap", target="s", lane="slow", request_class="c", model="m", status=200, ttft_s=1.8,
        late_lane="slow", rescue_sent_s=1.75,
    )  # fmt: skip
    assert lost.own_ttft_s == 1.8 and lost.late_ttft is None  # the late lane answered first after all
    w = Window()
    w.add(won, now=0)
    w.add(lost, now=0)
    # the slow lane: its own answer (1.8 s) and the wait of the attempt a rescue beat (2.1 s)
    assert w.lane_p99_ttft(now=1) == {
        "fast": pytest.approx(0.15),
        "slow": pytest.approx(quantile([1.8, 2.1], 0.99)),
    }
    assert record_value(won, "ttft") == pytest.approx(0.15)
