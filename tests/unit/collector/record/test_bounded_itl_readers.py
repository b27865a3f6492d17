"""Every reader of a record's gaps stays exact where it can when a long stream's gaps are only a sample."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.gateway.tap.stream_scan import StreamTap
from lanewatch.collector.record.goodput import Bound
from lanewatch.collector.record.itl import MAX_ITL_SAMPLES
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.collector.record.window import MAX_WINDOW_BYTES, Window, itl_summary, record_bytes
from lanewatch.exporters import names
from lanewatch.exporters.prometheus import RequestMetrics

LONG = tuple([0.001] * 99_998 + [0.5])  # a long stream with one slow gap the sample will miss


def rec(gaps: tuple[float, ...], **kw: object) -> RequestTiming:
    base: dict[str, object] = dict(
        source="tap", target="t", lane="fast", request_class="short", model="m",
        ttft_s=0.1, e2e_s=0.1 + math.fsum(gaps), output_tokens=len(gaps) + 1, itl_s=gaps,
    )  # fmt: skip
    base.update(kw)
    return RequestTiming(**base)  # type: ignore[arg-type]


def test_the_long_record_keeps_a_sample_and_the_slow_gap_only_in_its_totals() -> None:
    r = rec(LONG)
    assert len(r.itl_s) <= MAX_ITL_SAMPLES and 0.5 not in r.itl_s
    assert r.itl_stats is not None and (r.itl_stats.count, r.itl_stats.max_s) == (len(LONG), 0.5)


def test_the_window_summary_has_exact_count_mean_min_and_max() -> None:
    short, long = rec((0.01, 0.03)), rec(LONG)
    s = itl_summary([short, long])
    assert s is not None and s.count == len(LONG) + 2
    assert s.mean == pytest.approx((math.fsum(LONG) + 0.04) / (len(LONG) + 2))
    assert (s.min, s.max) == (0.001, 0.5)
    assert s.p50 == 0.001  # the sample stands for all the gaps, not for its own length
    window = Window()
    window.add(short, 0.0)
    window.add(long, 0.0)
    assert window.groups(0.0)[0].metrics["itl"] == s
    exact = itl_summary([short, rec((0.02, 0.04))])
    assert exact is not None and (exact.count, exact.p50, exact.max) == (4, 0.025, 0.04)


def test_the_itl_histogram_keeps_exact_count_and_sum() -> None:
    reg = CollectorRegistry()
    RequestMetrics(reg).observe(rec(LONG))
    found = {
        (s.name, s.labels.get("le")): s.value
        for fam in text_string_to_metric_families(generate_latest(reg).decode())
        for s in fam.samples
        if s.name.startswith(names.ITL_SECONDS)
    }
    assert found[(names.ITL_SECONDS + "_count", None)] == len(LONG)
    assert found[(names.ITL_SECONDS + "_sum", None)] == pytest.approx(math.fsum(LONG))
    assert found[(names.ITL_SECONDS + "_bucket", "+Inf")] == len(LONG)


def test_an_itl_bound_judges_the_slowest_gap_even_when_the_sample_missed_it() -> None:
    assert not Bound("itl", 0.1).met(rec(LONG))
    assert Bound("itl", 0.6).met(rec(LONG)) and Bound("itl", 0.1).met(rec((0.01, 0.02)))


def test_the_tap_keeps_a_long_stream_bounded_while_it_flows() -> None:
    tap = StreamTap("chat", sse=True)
    for i in range(100_000):
        tap.content_written(i * 0.001, 1)
        assert len(tap.gaps) < MAX_ITL_SAMPLES
    kept, stats = tap.itl()
    assert len(kept) <= MAX_ITL_SAMPLES and stats is not None and stats.count == 99_999
    assert stats.sum_s == pytest.approx(99.999) and stats.min_s == pytest.approx(0.001)


def test_the_window_is_bounded_in_bytes_as_well_as_time() -> None:
    big = rec(tuple([0.01] * MAX_ITL_SAMPLES), response_text="x" * 60_000)
    window = Window(window_s=300.0, max_bytes=1024 * 1024)
    for i in range(200):
        window.add(big, float(i))
    assert window.bytes <= 1024 * 1024 and len(window) == 1024 * 1024 // record_bytes(big)
    assert window.snapshot(199.0).bytes == window.bytes
    for i in range(200, 700):
        window.add(rec((0.01,)), float(i))
    assert len(window.records(700.0)) == 300 and window.bytes == 300 * record_bytes(rec((0.01,)))
    assert Window().max_bytes == MAX_WINDOW_BYTES
