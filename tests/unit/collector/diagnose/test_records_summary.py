"""Summarising many records: ITL quantiles from a seeded sample past the bound, the mean from every gap."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from lanewatch.collector.diagnose import lane_stats
from lanewatch.collector.diagnose import records as summary
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS
from lanewatch.collector.record.itl import MAX_ITL_SAMPLES, bounded_gaps
from lanewatch.collector.record.timing import SERVER_WAIT, RequestTiming, breakdown
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
    monkeypatch.setattr(lane_stats, "MAX_POOLED_GAPS", total // 10)
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


def _mixed(n: int = 120) -> list[RequestTiming]:
    """Stalling records, some without server phases, some with phases past their TTFT (clamped)."""
    rs = records(Shape(queue=0.4, stall_s=0.3, stall_every=3, long_prompt_every=4, error_every=9), n=n)
    out = []
    for i, r in enumerate(rs):
        if i % 5 == 1:
            r = replace(r, queue_s=None, prefill_s=None, decode_s=None, phases_source=None)
        elif i % 7 == 2 and r.ttft_s is not None:
            r = replace(r, queue_s=r.ttft_s * 2, connect_s=0.01, dns_s=0.002)
        out.append(r)
    return out


def _breakdown_means(ok: list[RequestTiming]) -> dict[str, float]:
    """The parts' means as breakdown() gives them, record by record (the definition)."""
    sums: dict[str, float] = {}
    counted = 0
    for r in ok:
        parts = breakdown(r)
        if parts:
            counted += 1
            for part, value in parts.items():
                sums[part] = sums.get(part, 0.0) + value
    return {p: s / counted for p, s in sums.items()}


@pytest.mark.parametrize("first_joined", [True, False])
def test_the_parts_are_breakdowns_means_in_its_order(first_joined: bool) -> None:
    rs = _mixed()
    rs.sort(key=lambda r: (r.queue_s is None) == first_joined)  # which kind comes first sets the order
    st = summary.lane_stats(rs, SLO, DEFAULT_THRESHOLDS)
    want = _breakdown_means([r for r in rs if r.ok])
    assert list(st.parts) == list(want)
    assert {p: v.value for p, v in st.parts.items()} == want  # the same floats, not approximately
    assert SERVER_WAIT in st.parts and "queue" in st.parts


def _stalls_gap_by_gap(ok: list[RequestTiming], p50: float, ratio: float) -> tuple[int, float, int]:
    """Stall count, excess and overlaps, walking every gap (the definition)."""
    limit = ratio * p50
    prompts = sorted(r.prompt_tokens for r in ok if r.prompt_tokens is not None)
    long_at = quantile(prompts, 0.9)
    arrivals = sorted(r.started_at for r in ok if (r.prompt_tokens or 0) >= long_at and long_at > prompts[0])
    stalls = overlapping = 0
    excess = 0.0
    for r in ok:
        at = r.started_at + (r.ttft_s or 0.0)
        for gap in r.itl_s:
            if gap >= limit:
                stalls += 1
                excess += gap - p50
                overlapping += any(at - gap <= a <= at + gap for a in arrivals)
            at += gap
    return stalls, excess, overlapping


def test_the_stalls_are_those_a_gap_by_gap_walk_finds() -> None:
    rs = _mixed()
    ok = [r for r in rs if r.ok]
    st = summary.lane_stats(rs, SLO, DEFAULT_THRESHOLDS)
    p50 = st.quantiles["itl_p50"].value
    stalls, excess, overlapping = _stalls_gap_by_gap(ok, p50, DEFAULT_THRESHOLDS.itl_tail_ratio)
    assert stalls > 10 and 0 < overlapping < stalls
    assert st.stall_share_of_e2e is not None and st.stalls_with_long_prompt is not None
    assert st.stall_share_of_e2e.value == excess / math.fsum(r.e2e_s for r in ok if r.e2e_s is not None)
    assert st.stalls_with_long_prompt.value == overlapping / stalls


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


def _streamed(r: RequestTiming, gaps: list[float], cap: int = MAX_ITL_SAMPLES) -> RequestTiming:
    """`r` with a stream of `gaps`, kept as a record keeps them (an even sample past `cap`)."""
    kept, totals = bounded_gaps(gaps, cap)
    ttft = r.ttft_s or 0.0
    return replace(
        r, itl_s=kept, itl_stats=totals, output_tokens=len(gaps) + 1, e2e_s=ttft + math.fsum(gaps) + 0.001
    )


def test_a_record_that_kept_a_sample_of_its_gaps_weighs_as_all_of_them() -> None:
    # One long answer of 40,960 gaps of 10 ms (the record keeps 1,024 of them and exact totals)
    # beside two short ones of 100 gaps of 100 ms: 0.5 % of all gaps are slow, so p99 is 10 ms.
    # Read as its sample alone, the long answer would weigh as 1,024 gaps and p99 be 100 ms.
    base = records(Shape(), n=3)
    long = [0.01] * 40_960
    short = [_streamed(r, [0.1] * 100) for r in base[1:]]
    sampled = [_streamed(base[0], long), *short]
    whole = [_streamed(base[0], long, cap=10**6), *short]  # every gap kept: the truth
    assert sampled[0].itl_stats is not None and len(sampled[0].itl_s) <= MAX_ITL_SAMPLES
    got = summary.lane_stats(sampled, SLO, DEFAULT_THRESHOLDS)
    truth = summary.lane_stats(whole, SLO, DEFAULT_THRESHOLDS)
    assert got.quantiles["itl_p99"].value == truth.quantiles["itl_p99"].value == 0.01
    assert got.means["itl"].value == pytest.approx(math.fsum([*long, *[0.1] * 200]) / 41_160, rel=1e-12)
    assert "of 41,160 gaps" in got.quantiles["itl_p99"].source
    assert got.fluidity is not None and truth.fluidity is not None
    assert got.fluidity.value == pytest.approx(truth.fluidity.value, rel=1e-9)  # alike gaps: exact
    assert got.fluidity.value < 1.0  # the short answers' 100 ms gaps miss the 50 ms TPOT SLO
