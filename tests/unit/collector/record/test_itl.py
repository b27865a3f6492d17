"""A record keeps at most MAX_ITL_SAMPLES gaps, evenly spread, with exact count, sum, min and max."""

from __future__ import annotations

import json
import math

import pytest

from lanewatch.collector.record.files import parse_record_line, record_line
from lanewatch.collector.record.itl import MAX_ITL_SAMPLES, GapSampler, ItlStats, bounded_gaps
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import RequestTiming

MILLION = [0.001 * (i % 7) for i in range(1_000_000)]  # 10^6 tiny events: 999,999 gaps and one more


def _record(**kw: object) -> RequestTiming:
    base: dict[str, object] = dict(
        source="probe", target="t", lane="fast", request_class="short", model="m",
        ttft_s=0.1, e2e_s=1100.0, output_tokens=1_000_001,
    )  # fmt: skip
    base.update(kw)
    return RequestTiming(**base)  # type: ignore[arg-type]


def test_few_gaps_are_kept_whole_with_no_totals() -> None:
    gaps = [0.01 * i for i in range(MAX_ITL_SAMPLES)]
    assert bounded_gaps(gaps) == (tuple(gaps), None)
    r = _record(itl_s=tuple(gaps))
    assert r.itl_stats is None and "itl_stats" not in r.to_json()
    totals = r.itl_totals
    assert totals is not None and (totals.count, totals.min_s, totals.max_s) == (len(gaps), 0.0, gaps[-1])


def test_a_million_gaps_become_an_even_sample_with_exact_totals() -> None:
    kept, stats = bounded_gaps(MILLION)
    assert MAX_ITL_SAMPLES // 2 < len(kept) <= MAX_ITL_SAMPLES
    stride = 1 << math.ceil(math.log2(len(MILLION) / MAX_ITL_SAMPLES))
    assert kept == tuple(MILLION[::stride])  # every stride-th gap, from the first
    assert stats == ItlStats(len(MILLION), math.fsum(MILLION), 0.0, 0.006)


def test_gaps_taken_in_batches_give_what_one_pass_gives() -> None:
    whole_kept, whole = bounded_gaps(MILLION)
    batched = GapSampler()
    for start in range(0, 999_000, 1000):
        batched.take(MILLION[start : start + 1000])
    kept, stats = batched.result(MILLION[999_000:])
    assert kept == whole_kept and stats is not None and whole is not None
    assert (stats.count, stats.min_s, stats.max_s) == (whole.count, whole.min_s, whole.max_s)
    assert stats.sum_s == pytest.approx(whole.sum_s, rel=1e-12)


def test_a_record_with_a_million_gaps_is_cut_to_a_small_line_that_reads_back() -> None:
    r = _record(itl_s=tuple(MILLION))
    assert len(r.itl_s) <= MAX_ITL_SAMPLES and r.itl_stats is not None and r.itl_stats.count == len(MILLION)
    line = record_line(r)
    assert len(line) < 64 * 1024  # not 5 MB
    assert parse_record_line(line, 1) == r == RequestTiming.from_json(json.loads(line))
    totals = {"count": 1_000_000, "sum_s": r.itl_stats.sum_s, "min_s": 0.0, "max_s": 0.006}
    assert json.loads(line)["itl_stats"] == totals
    assert r.tpot_s == pytest.approx(1099.9 / 1_000_000)  # TPOT never read the gaps


def test_a_line_without_itl_stats_reads_as_every_gap_and_unknown_keys_are_ignored() -> None:
    old = record_line(_record(itl_s=(0.01, 0.02)))
    assert "itl_stats" not in old
    assert parse_record_line(old, 1).itl_totals == ItlStats(2, 0.03, 0.01, 0.02)
    newer = json.loads(record_line(_record(itl_s=tuple(MILLION))))
    newer["itl_stats"]["p50_s"] = 0.003  # a later version's extra total
    assert RequestTiming.from_json(newer).itl_stats == ItlStats.from_json(newer["itl_stats"])


@pytest.mark.parametrize(
    ("stats", "field"),
    [
        ({"count": 1, "sum_s": 0.1, "min_s": 0.1, "max_s": 0.1}, "itl_stats.count"),  # fewer than itl_s
        ({"count": 5, "sum_s": float("nan"), "min_s": 0.0, "max_s": 0.1}, "itl_stats.sum_s"),
        ({"count": 5, "sum_s": 1.0, "min_s": 0.5, "max_s": 0.1}, "itl_stats.min_s"),
        ({"count": -1, "sum_s": 1.0, "min_s": 0.0, "max_s": 0.1}, "itl_stats.count"),
        ({"count": 5, "sum_s": 1.0, "min_s": 0.0}, "itl_stats.max_s"),
    ],
)
def test_bad_totals_are_refused_naming_the_field(stats: dict[str, float], field: str) -> None:
    data = _record(itl_s=(0.1, 0.2)).to_json() | {"itl_stats": stats}
    with pytest.raises(RecordError) as info:
        RequestTiming.from_json(data)
    assert info.value.field == field
