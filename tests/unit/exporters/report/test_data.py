from __future__ import annotations

import math
from dataclasses import replace

import pytest

from lanewatch.collector.record.timing import ErrorKind, RequestTiming, breakdown
from lanewatch.collector.record.window import quantile
from lanewatch.exporters.report.data import (
    ALL_CLASSES,
    MAX_POINTS,
    Event,
    SummaryError,
    build_report,
    parse_events,
    rescue_rows,
    spans,
)

from .sample_records import EVENTS, FAULT, T0, sample_records


@pytest.fixture(scope="module")
def records() -> list[RequestTiming]:
    return sample_records()


def test_parse_events_sorts_and_keeps_details() -> None:
    events = parse_events({"events": list(reversed(EVENTS)), "lanes": {}})
    assert [e.kind for e in events] == [str(e["kind"]) for e in EVENTS]
    assert events[0] == Event(T0 + 60.0, "fault_injected", "lane=slow, queue_factor=4")
    assert parse_events({}) == ()


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "expected a JSON object at the top"),
        ({"events": {}}, "events: expected a list"),
        ({"events": [{"kind": "alert_firing"}, 3]}, "events[0].t: expected Unix seconds, got None"),
        ({"events": [{"t": 1.0, "kind": "x"}, 3]}, "events[1]: expected an object"),
        ({"events": [{"t": True, "kind": "x"}]}, "events[0].t"),
        ({"events": [{"t": 1.0, "kind": ""}]}, "events[0].kind: expected a string"),
    ],
)
def test_parse_events_names_the_bad_field(doc: object, message: str) -> None:
    with pytest.raises(SummaryError) as exc:
        parse_events(doc)
    assert str(exc.value).startswith(message)


def test_overview(records: list[RequestTiming]) -> None:
    d = build_report(records, source="x.jsonl", bad_lines=2)
    assert (d.n_records, d.n_ok) == (len(records), sum(r.ok for r in records))
    assert 0 < d.n_records - d.n_ok < 40
    assert d.lanes == ("fast", "slow")
    assert d.classes == ("short", "summary", "story")  # by output tokens, not by name
    assert d.t0 == min(r.started_at for r in records) and d.t1 == max(r.started_at for r in records)
    assert (d.targets, d.sources, d.bad_lines) == (("sim-fast", "sim-slow"), ("probe",), 2)


def test_boxes_are_quantiles_of_ok_e2e_only(records: list[RequestTiming]) -> None:
    d = build_report(records)
    assert [(b.request_class, b.lane) for b in d.boxes][:2] == [("short", "fast"), ("short", "slow")]
    assert len(d.boxes) == 6
    box = next(b for b in d.boxes if (b.lane, b.request_class) == ("slow", "story"))
    xs = sorted(
        r.e2e_s for r in records if r.ok and r.lane == "slow" and r.request_class == "story" and r.e2e_s
    )
    assert box.n == len(xs)
    assert (box.q1, box.median, box.q3) == tuple(quantile(xs, q) for q in (0.25, 0.5, 0.75))
    assert box.hi < 30.0  # the failed ttft_timeout records (e2e 30 s) stay out


def test_flatness_tells_the_lanes_apart(records: list[RequestTiming]) -> None:
    d = build_report(records)
    # fast: E2E grows ~8x from short to story; slow: the queue dominates, so the classes sit closer
    assert d.flatness["fast"] > 2 * d.flatness["slow"]


def test_breakdown_means_stack_to_mean_e2e_with_and_without_server_phases(
    records: list[RequestTiming],
) -> None:
    d = build_report(records)
    fast, slow = d.breakdowns
    assert [p for p, _ in fast.parts] == ["dns", "connect", "tls", "send", "server_wait", "decode"]
    assert [p for p, _ in slow.parts] == [
        "dns",
        "connect",
        "tls",
        "send",
        "queue",
        "prefill",
        "residual",
        "decode",
    ]
    assert (fast.with_server_phases, slow.with_server_phases) == (0, slow.n)
    for lane, b in (("fast", fast), ("slow", slow)):
        ok = [r for r in records if r.ok and r.lane == lane]
        assert b.n == len(ok)
        assert b.total == pytest.approx(math.fsum(r.e2e_s or 0 for r in ok) / len(ok), rel=1e-9)


def test_breakdown_of_a_lane_mixing_joined_and_unjoined_records() -> None:
    base = RequestTiming(
        source="tap", target="t", lane="l", request_class="c", model="m", ttft_s=1.0, e2e_s=2.0
    )
    joined = base.with_server_phases(0.5, 0.25, 1.0)
    d = build_report([base, joined])
    parts = dict(d.breakdowns[0].parts)
    assert parts == {"queue": 0.25, "prefill": 0.125, "residual": 0.125, "server_wait": 0.5, "decode": 1.0}
    assert sum(breakdown(joined).values()) == 2.0


def test_points_and_fits(records: list[RequestTiming]) -> None:
    d = build_report(records)
    e2e = {p.lane: p for p in d.points if p.metric == "e2e"}
    ttft = {p.lane: p for p in d.points if p.metric == "ttft"}
    assert e2e["fast"].fit is not None and ttft["fast"].fit is not None
    assert 0.002 <= e2e["fast"].fit.per_token_s <= 0.003  # the sample's fast-lane TPOT
    assert abs(ttft["fast"].fit.per_token_s) < 0.0005  # TTFT does not grow with output tokens
    assert e2e["fast"].total == len(e2e["fast"].points) == sum(r.ok and r.lane == "fast" for r in records)


def test_points_are_thinned_evenly_above_the_cap() -> None:
    r = RequestTiming(
        source="probe", target="t", lane="l", request_class="c", model="m", ttft_s=0.1, e2e_s=1.0
    )
    many = [
        replace(r, output_tokens=i % 50 + 1, e2e_s=0.01 * (i % 50 + 1)) for i in range(MAX_POINTS * 2 + 7)
    ]
    p = next(p for p in build_report(many).points if p.metric == "e2e")
    assert p.total == len(many) and MAX_POINTS // 2 < len(p.points) <= MAX_POINTS
    assert p.fit is not None and p.fit.n == len(many)  # the fit uses every point


def test_timeline_rises_during_the_fault(records: list[RequestTiming]) -> None:
    d = build_report(records)
    slow = next(s for s in d.timeline if s.lane == "slow").points
    w = d.timeline_window_s
    assert w == pytest.approx((d.t1 - d.t0) / 12)  # type: ignore[operator]
    before = [v for t, v in slow if w < t < FAULT[0] and v is not None]
    during = [v for t, v in slow if FAULT[0] + w < t < FAULT[1] and v is not None]
    assert before and during and min(during) > 2 * max(before)
    assert slow[0][0] == 0.0 and slow[-1][0] == pytest.approx(d.t1 - d.t0)  # type: ignore[operator]


def test_timeline_needs_timestamps() -> None:
    r = RequestTiming(
        source="probe", target="t", lane="l", request_class="c", model="m", ttft_s=0.1, e2e_s=1.0
    )
    assert build_report([r, r]).timeline == ()


def test_rows_per_lane_and_class_with_errors_by_kind(records: list[RequestTiming]) -> None:
    d = build_report(records)
    assert [(r.lane, r.request_class) for r in d.rows][:4] == [
        ("fast", "short"), ("fast", "summary"), ("fast", "story"), ("fast", ALL_CLASSES),
    ]  # fmt: skip
    for row in d.rows:
        assert sum(n for _, n in row.errors_by_kind) == row.stats.errors
    total = next(r for r in d.rows if r.lane == "slow" and r.request_class == ALL_CLASSES)
    assert total.stats.requests == sum(r.lane == "slow" for r in records)
    assert {k for k, _ in total.errors_by_kind} <= {"http_5xx", "ttft_timeout"}
    assert {"ttft", "tpot", "itl", "e2e"} <= set(total.stats.metrics)


def test_all_failed_records_still_give_rows_but_no_chart_data() -> None:
    failed = [
        RequestTiming(
            source="probe", target="t", lane="l", request_class="c", model="m", error=ErrorKind.DNS
        ),
        RequestTiming(
            source="probe", target="t", lane="l", request_class="c", model="m", error=ErrorKind.TLS
        ),
    ]
    d = build_report(failed)
    assert (d.boxes, d.breakdowns, d.points, d.flatness) == ((), (), (), {})
    assert d.rows[0].errors_by_kind == (("dns", 1), ("tls", 1))


def test_spans_pair_start_and_end_and_leave_open_ones_running() -> None:
    events = [Event(10, "fault_injected"), Event(20, "alert_firing"), Event(30, "fault_cleared")]
    assert spans(events, 50) == [("fault", 10, 30), ("alert", 20, 50)]
    assert spans([Event(5, "alert_resolved")], 50) == []


def _rescued(lane: str, late_wait_s: float | None, ttft_s: float = 1.9) -> RequestTiming:
    return RequestTiming(
        source="tap", target=lane, lane=lane, request_class="c", model="m", status=200, ttft_s=ttft_s,
        e2e_s=3.0, late_lane="slow", rescue_sent_s=1.8, late_wait_s=late_wait_s,
    )  # fmt: skip


def test_rescue_rows_count_what_won_and_the_time_it_saved_at_least() -> None:
    plain = RequestTiming(source="tap", target="t", lane="slow", request_class="c", model="m", ttft_s=0.4)
    records = [
        plain,
        _rescued("fast", 2.1),
        _rescued("fast", 2.5),
        _rescued("fast", None),
        _rescued("slow", None),
    ]
    (row,) = rescue_rows(records)
    assert (row.late_lane, row.to_lane, row.sent, row.won) == ("slow", "fast", 4, 3)
    assert row.saved_s == pytest.approx(0.6)  # of 0.2 and 0.6, the upper median; none for the unknown wait
    assert rescue_rows([plain]) == ()
    (lost,) = rescue_rows([_rescued("slow", None)])  # nothing won: where it went is unknown
    assert (lost.to_lane, lost.sent, lost.won, lost.saved_s) == ("?", 1, 0, None)
    assert build_report(records).rescues == (row,)
