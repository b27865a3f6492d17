"""The handler's in-flight table: what a report says of each streamed request, its bounds, and the
settings of progress reports and the degrade endpoint."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lanewatch.collector.progress.inflight import Progress
from lanewatch.integrations.litellm.flights import Flights, has_content
from lanewatch.integrations.litellm.settings import settings_from


def test_a_waiting_request_reports_its_age_then_its_first_token_once() -> None:
    flights = Flights()
    flight = flights.begin("fast", 10.0)
    assert flight is not None
    assert flights.table.report(10.25) == [Progress(flight.rid, "fast", 0.25, False)]
    Flights.first_token(flight, 10.5)
    Flights.first_token(flight, 10.9)  # the first call counts
    assert flights.table.report(10.6) == [Progress(flight.rid, "fast", 0.5, True)]
    flights.end(flight)
    flights.end(flight)  # a second end (the stream's close, then the success event) adds nothing
    assert flights.table.report(11.0) == [] and len(flights) == 0


def test_a_first_token_between_reports_is_still_reported_at_the_end() -> None:
    flights = Flights()
    flight = flights.begin("slow", 1.0)
    assert flight is not None
    Flights.first_token(flight, 1.25)
    flights.end(flight)
    assert flights.table.report(2.0) == [Progress(flight.rid, "slow", 0.25, True)]


def test_a_request_that_ended_without_a_token_reports_nothing_more() -> None:
    flights = Flights()
    flight = flights.begin("slow", 1.0)
    assert flight is not None
    flights.end(flight)
    assert flights.table.report(5.0) == []


def test_the_table_is_bounded_by_count_and_by_age() -> None:
    flights = Flights(max_flights=2, max_age_s=60.0)
    first, second = flights.begin("fast", 0.0), flights.begin("fast", 1.0)
    assert first is not None and second is not None
    assert flights.begin("fast", 2.0) is None and flights.refused == 1
    # No hook ended them: past max_age_s a report ends them unseen, and the table takes more.
    events = flights.table.report(60.5)
    assert [e.id for e in events] == [second.rid] and flights.expired == 1
    assert flights.begin("fast", 62.0) is not None and flights.expired == 2
    assert flights.get(first.rid) is None and flights.get("1") is None


def test_answer_text_counts_as_content_a_role_or_an_empty_delta_does_not() -> None:
    chunk = SimpleNamespace
    assert not has_content(chunk(choices=[chunk(delta=chunk(role="assistant", content=None))]))
    assert not has_content(chunk(choices=[chunk(delta=chunk(content=""), text=None)]))
    assert has_content(chunk(choices=[chunk(delta=chunk(content="Hi"))]))
    assert has_content(chunk(choices=[chunk(delta=chunk(content=None, reasoning_content="hm"))]))
    assert has_content({"choices": [{"text": "x"}]})  # a completion's chunk
    assert not has_content({"choices": []}) and not has_content(object())


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("progress_interval_s", 0),
        ("progress_interval_s", "0.1"),
        ("progress_max_flights", 0),
        ("progress_max_age_s", 900),  # past the guard's memory of a judged request
        ("reporter_name", "a b"),
        ("reporter_name", "x" * 17),
        ("admin_timeout_s", 0),
        ("admin_max_connections", 0),
        ("admin_max_connections", True),
    ],
)
def test_a_setting_out_of_its_bounds_is_refused_by_name(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=key):
        settings_from({key: value})


def test_the_defaults_report_every_tenth_of_a_second_and_bound_the_endpoint() -> None:
    s = settings_from({"progress_interval_s": None, "reporter_name": "litellm-eu.1"})
    assert (s.progress_interval_s, s.reporter_name) == (None, "litellm-eu.1")
    d = settings_from({})
    assert (d.progress_interval_s, d.admin_timeout_s, d.admin_max_connections) == (0.1, 5.0, 16)
