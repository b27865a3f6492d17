from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.join import Joiner
from lanewatch.collector.record.timing import ErrorKind, RequestTiming


def rec(trace: str | None, status: int | None = 200, request_id: str | None = None) -> RequestTiming:
    return RequestTiming(
        source="probe", target="t", lane="fast", request_class="short", model="m",
        trace_id=trace, status=status, request_id=request_id, ttft_s=0.1, e2e_s=0.5,
        error=None if status == 200 else ErrorKind.HTTP_5XX,
    )  # fmt: skip


def span(trace: str, queue: float = 0.01, request_id: str | None = None) -> ServerSpan:
    return ServerSpan(trace, queue_s=queue, prefill_s=0.02, decode_s=0.3, request_id=request_id)


T1, T2, T3 = ("a" * 32, "b" * 32, "c" * 32)


def test_record_then_span() -> None:
    j = Joiner(wait_s=5, max_pending=10)
    assert j.add_record(rec(T1), now=0) == []
    out = j.add_span(span(T1), now=0.2)
    assert len(out) == 1 and out[0].has_server_phases
    assert (out[0].queue_s, out[0].prefill_s, out[0].decode_s) == (0.01, 0.02, 0.3)
    assert (j.stats.spans_received, j.stats.spans_joined, j.stats.unjoined_records) == (1, 1, 0)
    assert j.pending == (0, 0)


def test_span_then_record() -> None:
    j = Joiner(wait_s=5, max_pending=10)
    assert j.add_span(span(T1), now=0) == []
    out = j.add_record(rec(T1), now=1)
    assert len(out) == 1 and out[0].queue_s == 0.01
    assert j.stats.orphan_spans == 0


def test_records_without_a_possible_span_pass_at_once() -> None:
    j = Joiner(wait_s=5, max_pending=10)
    for r in (rec(None), rec(T1, status=503), rec(T2, status=None)):
        assert j.add_record(r, now=0) == [r]
    assert j.pending == (0, 0) and j.stats.unjoined_records == 0


def test_record_waits_bounded_time_and_late_span_is_an_orphan() -> None:
    j = Joiner(wait_s=2, max_pending=10)
    j.add_record(rec(T1), now=0)
    assert j.expire(now=1.9) == []
    late = j.expire(now=2.0)
    assert len(late) == 1 and not late[0].has_server_phases
    assert j.stats.unjoined_records == 1
    assert j.add_span(span(T1), now=2.5) == []
    j.expire(now=4.6)
    assert j.stats.orphan_spans == 1 and j.pending == (0, 0)


def test_bounds_push_out_the_oldest() -> None:
    j = Joiner(wait_s=60, max_pending=2)
    j.add_record(rec(T1), now=0)
    j.add_record(rec(T2), now=1)
    out = j.add_record(rec(T3), now=2)
    assert [r.trace_id for r in out] == [T1]
    assert j.stats.unjoined_records == 1
    for t in ("1" * 32, "2" * 32, "3" * 32):
        j.add_span(span(t), now=3)
    assert j.stats.orphan_spans == 1 and j.pending == (2, 2)


def test_shared_trace_matches_by_request_id_then_in_order() -> None:
    j = Joiner(wait_s=5, max_pending=10)
    j.add_record(rec(T1, request_id="r1"), now=0)
    j.add_record(rec(T1, request_id="r2"), now=0)
    out = j.add_span(span(T1, queue=0.2, request_id="chatcmpl-r2"), now=0.1)
    assert [(r.request_id, r.queue_s) for r in out] == [("r2", 0.2)]
    out = j.add_span(span(T1, queue=0.1), now=0.1)
    assert [(r.request_id, r.queue_s) for r in out] == [("r1", 0.1)]


def test_flush_releases_every_waiting_record() -> None:
    j = Joiner(wait_s=5, max_pending=10)
    j.add_record(rec(T1), now=0)
    j.add_record(rec(T2), now=0)
    assert len(j.flush()) == 2 and j.stats.unjoined_records == 2
    assert j.next_deadline() is None


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.booleans(), st.floats(0, 3)), max_size=60))
def test_every_record_comes_out_once_and_memory_stays_bounded(events: list[tuple[int, bool, float]]) -> None:
    j = Joiner(wait_s=1.0, max_pending=5)
    now, sent, out = 0.0, 0, []
    for trace_no, is_span, dt in events:
        now += dt
        trace = f"{trace_no:032x}"
        if is_span:
            out += j.add_span(span(trace), now)
        else:
            sent += 1
            out += j.add_record(rec(trace), now)
        records_waiting, spans_waiting = j.pending
        assert records_waiting <= 5 and spans_waiting <= 5
    out += j.flush()
    assert len(out) == sent
    joined = sum(r.has_server_phases for r in out)
    assert joined == j.stats.spans_joined
    assert sent - joined == j.stats.unjoined_records
