from __future__ import annotations

from lanewatch.collector.probe.join import OrderedJoin
from lanewatch.collector.record.timing import RequestTiming
from tests.unit.collector.record.test_join import rec, span

T1, T2, T3 = ("a" * 32, "b" * 32, "c" * 32)


def ids(records: list[RequestTiming]) -> list[str | None]:
    return [r.trace_id for r in records]


def test_a_joined_record_waits_for_the_unjoined_one_before_it() -> None:
    j = OrderedJoin(wait_s=2)
    assert j.add_record(rec(T1), now=0) == []
    assert j.add_record(rec(T2), now=1) == []
    assert j.add_spans([span(T2)], now=1.1) == []  # T2 is joined but T1 still waits
    assert j.held == 2
    out = j.expire(now=2.0)  # T1's wait ran out: both leave, in probe order
    assert ids(out) == [T1, T2]
    assert [r.has_server_phases for r in out] == [False, True]
    assert j.held == 0 and j.stats.unjoined_records == 1 and j.stats.spans_joined == 1


def test_records_leave_as_soon_as_joined_in_order() -> None:
    j = OrderedJoin(wait_s=5)
    j.add_record(rec(T1), now=0)
    j.add_record(rec(T2), now=0.5)
    out = j.add_spans([span(T2), span(T1, queue=0.03)], now=0.6)
    assert ids(out) == [T1, T2] and out[0].queue_s == 0.03
    assert j.next_deadline() is None


def test_a_span_before_its_record_joins_at_once() -> None:
    j = OrderedJoin(wait_s=5)
    assert j.add_spans([span(T1)], now=0) == []
    out = j.add_record(rec(T1), now=0.1)
    assert ids(out) == [T1] and out[0].has_server_phases


def test_records_that_cannot_join_pass_but_keep_their_place() -> None:
    j = OrderedJoin(wait_s=5)
    j.add_record(rec(T1), now=0)
    assert j.add_record(rec(None), now=0.1) == []  # behind T1
    assert j.add_record(rec(T2, status=503), now=0.2) == []
    out = j.add_spans([span(T1)], now=0.3)
    assert ids(out) == [T1, None, T2] and [r.status for r in out] == [200, 200, 503]


def test_flush_lets_out_everything_unjoined() -> None:
    j = OrderedJoin(wait_s=60)
    j.add_record(rec(T1), now=0)
    j.add_record(rec(T2), now=0)
    j.add_record(rec(None), now=0)
    j.add_spans([span(T3)], now=0)  # an orphan stays an orphan
    out = j.flush()
    assert ids(out) == [T1, T2, None] and not any(r.has_server_phases for r in out)
    assert j.held == 0
