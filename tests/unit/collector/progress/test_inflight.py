"""The in-flight table the fast guard reads: starts, ends, and the events each report makes."""

from __future__ import annotations

from lanewatch.collector.progress.inflight import MAX_REPORT_EVENTS, InFlight, Progress


class _First:
    """A settable first-token time, as the data path's getter."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self) -> float | None:
        return self.at


def test_ids_are_unique_and_len_counts_requests_under_way() -> None:
    table = InFlight()
    a = table.start("fast", 0.0, lambda: None)
    b = table.start("fast", 0.0, lambda: None)
    assert a != b
    assert len(table) == 2
    table.end(a)
    assert len(table) == 1


def test_waiting_request_reports_its_age_every_time() -> None:
    table = InFlight()
    rid = table.start("fast", 10.0, lambda: None)
    assert table.report(10.5) == [Progress(rid, "fast", 0.5, False)]
    assert table.report(12.0) == [Progress(rid, "fast", 2.0, False)]
    assert len(table) == 1


def test_age_is_never_negative() -> None:
    table = InFlight()
    rid = table.start("fast", 10.0, lambda: None)
    assert table.report(9.0) == [Progress(rid, "fast", 0.0, False)]


def test_first_token_is_reported_once_as_ttft_then_the_entry_is_gone() -> None:
    table = InFlight()
    first = _First()
    rid = table.start("mid", 1.0, first)
    first.at = 1.75
    assert table.report(5.0) == [Progress(rid, "mid", 0.75, True)]
    assert len(table) == 0
    table.end(rid)  # its end adds nothing: already reported
    assert table.report(6.0) == []


def test_request_that_ended_between_reports_reports_its_first_token() -> None:
    table = InFlight()
    first = _First()
    rid = table.start("fast", 2.0, first)
    first.at = 2.25
    table.end(rid)
    assert len(table) == 0
    assert table.report(9.0) == [Progress(rid, "fast", 0.25, True)]
    assert table.report(10.0) == []


def test_request_that_ended_without_a_token_reports_nothing_more() -> None:
    table = InFlight()
    rid = table.start("fast", 0.0, lambda: None)
    table.end(rid)
    assert table.report(100.0) == []
    assert table.dropped == 0


def test_end_of_unknown_id_is_ignored() -> None:
    table = InFlight()
    table.end(12345)
    assert table.report(1.0) == []


def test_report_is_bounded_and_keeps_the_rest_for_later() -> None:
    table = InFlight()
    ids = [table.start("fast", 0.0, lambda: None) for _ in range(MAX_REPORT_EVENTS + 10)]
    out = table.report(1.0)
    assert len(out) == MAX_REPORT_EVENTS
    assert [e.id for e in out] == ids[:MAX_REPORT_EVENTS]  # the oldest first
    assert len(table) == MAX_REPORT_EVENTS + 10  # waiting requests stay


def test_ended_first_tokens_beyond_the_bound_are_dropped_and_counted() -> None:
    table = InFlight()
    ids = [table.start("fast", 0.0, lambda: 0.5) for _ in range(4096 + 3)]
    for rid in ids:
        table.end(rid)
    assert table.dropped == 3
    out = table.report(1.0)
    assert len(out) == 4096
    assert all(e.first_token and e.age_s == 0.5 for e in out)


def test_an_attempt_given_up_without_a_token_reports_its_last_age() -> None:
    table = InFlight()
    late = table.start("slow", 1.0, lambda: None)
    table.end(late, 3.25)  # closed past its SLO, maybe between two reports: its wait is still judged
    assert table.report(4.0) == [Progress(late, "slow", 2.25, False)]
    answered = table.start("fast", 1.0, lambda: 1.125)
    table.end(answered, 5.0)  # a first token is reported as one, whenever the end came
    assert table.report(6.0) == [Progress(answered, "fast", 0.125, True)]
