"""Summarising many records: ITL quantiles from a seeded sample past the bound, the mean from every gap."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from lanewatch.collector.diagnose import records as summary
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS
from lanewatch.collector.record.window import quantile
from tests.unit.collector.diagnose.build import SLO, Shape, records


def test_few_gaps_give_exact_quantiles_and_say_nothing_of_a_sample() -> None:
    rs = records(Shape(stall_s=0.3, stall_every=7), n=60)
    st = summary.lane_stats(rs, SLO, DEFAULT_THRESHOLDS)
    gaps = sorted(g for r in rs for g in r.itl_s)
    assert st.quantiles["itl_p99"].value == quantile(gaps, 0.99)
    assert "sample" not in st.quantiles["itl_p99"].source


def test_past_the_bound_quantiles_come_from_a_labelled_sample_and_the_mean_from_every_gap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rs = records(Shape(stall_s=0.3, stall_every=2), n=300)
    total = sum(len(r.itl_s) for r in rs)
    monkeypatch.setattr(summary, "MAX_POOLED_GAPS", total // 10)
    st = summary.lane_stats(rs, SLO, DEFAULT_THRESHOLDS)
    p99 = st.quantiles["itl_p99"]
    assert f"of {total:,} gaps" in p99.source and "seeded sample" in p99.source
    assert st.quantiles["itl_p50"].value == pytest.approx(0.02)
    assert p99.value == pytest.approx(0.3)  # the stalls (about 2 % of the gaps) are still seen
    exact = math.fsum(g for r in rs for g in r.itl_s) / total
    assert st.means["itl"].value == pytest.approx(exact, rel=1e-12)
    again = summary.lane_stats(rs, SLO, DEFAULT_THRESHOLDS)
    assert again.quantiles == st.quantiles  # seeded: the same file gives the same figures


def test_fluidity_counts_a_stalled_record_and_skips_none(monkeypatch: pytest.MonkeyPatch) -> None:
    fine = records(Shape(), n=30)
    stalled = records(Shape(stall_s=0.3, stall_every=1), n=30)
    assert summary.lane_stats(fine, SLO, DEFAULT_THRESHOLDS).fluidity.value == 1.0  # type: ignore[union-attr]
    low = summary.lane_stats(stalled, SLO, DEFAULT_THRESHOLDS).fluidity
    assert low is not None and low.value < 0.9
    mixed = summary.lane_stats([*fine, *[replace(r, lane="slow") for r in stalled]], SLO, DEFAULT_THRESHOLDS)
    assert mixed.fluidity is not None and 1.0 > mixed.fluidity.value > low.value


def test_the_prefill_slope_needs_prompt_sizes_that_spread() -> None:
    # One template: prompts 2,790-2,795 tokens, prefill noise. The fit would be a large negative slope.
    narrow = [
        replace(r, prompt_tokens=2790 + i % 6).with_server_phases(0.0, 1.5 - 0.1 * (i % 6), 0.01)
        for i, r in enumerate(records(Shape(), n=30))
    ]
    assert summary.lane_stats(narrow, SLO, DEFAULT_THRESHOLDS).prefill_per_prompt_token is None
    # Sizes from 100 to 2,000 tokens, prefill 1 ms per token: the slope is measured.
    wide = [
        replace(r, prompt_tokens=100 + 100 * (i % 20)).with_server_phases(
            0.0, 0.001 * (100 + 100 * (i % 20)), 0.01
        )
        for i, r in enumerate(records(Shape(), n=40))
    ]
    slope = summary.lane_stats(wide, SLO, DEFAULT_THRESHOLDS).prefill_per_prompt_token
    assert slope is not None and slope.value == pytest.approx(0.001)
