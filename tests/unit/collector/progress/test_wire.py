"""The `POST /v1/progress` body: round trip, whole-body refusals, and per-event refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.progress.wire import (
    MAX_AGE_S,
    MAX_EVENTS,
    ProgressError,
    encode_progress,
    parse_progress,
)

GOOD: list[Any] = [1, "fast", 0.5, False]


def _body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def test_round_trip() -> None:
    events = [
        Progress(1, "fast", 0.5, False),
        Progress(2, "slow-lane.v2_a", 1.25, True),
        Progress(2**63 - 1, "m", 0.0, True),
    ]
    parsed = parse_progress(encode_progress("gw-1:8080", events))
    assert parsed.reporter == "gw-1:8080"
    assert parsed.events == events
    assert parsed.refused == 0


def test_round_trip_empty() -> None:
    parsed = parse_progress(encode_progress("r", []))
    assert parsed.events == []
    assert parsed.refused == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        (b"\xff\xfe", "body"),
        (b"", "body"),
        (_body([1, 2]), "body"),
        (_body("reporter"), "body"),
        (_body({"events": []}), "reporter"),
        (_body({"reporter": "", "events": []}), "reporter"),
        (_body({"reporter": "a b", "events": []}), "reporter"),
        (_body({"reporter": "x" * 65, "events": []}), "reporter"),
        (_body({"reporter": 7, "events": []}), "reporter"),
        (_body({"reporter": "r"}), "events"),
        (_body({"reporter": "r", "events": {"0": GOOD}}), "events"),
        (_body({"reporter": "r", "events": "[]"}), "events"),
        (_body({"reporter": "r", "events": [GOOD] * (MAX_EVENTS + 1)}), "events"),
    ],
)
def test_bad_body_is_refused_whole_naming_the_field(body: bytes, field: str) -> None:
    with pytest.raises(ProgressError) as caught:
        parse_progress(body)
    assert str(caught.value).startswith(f"{field}:")


def test_max_events_is_accepted() -> None:
    parsed = parse_progress(_body({"reporter": "r", "events": [GOOD] * MAX_EVENTS}))
    assert len(parsed.events) == MAX_EVENTS


def test_reporter_of_64_characters_is_accepted() -> None:
    assert parse_progress(_body({"reporter": "x" * 64, "events": []})).reporter == "x" * 64


@pytest.mark.parametrize(
    "event",
    [
        [1, "fast", 0.5],
        [1, "fast", 0.5, False, 0],
        [],
        {"id": 1},
        "1,fast,0.5,false",
        None,
        [True, "fast", 0.5, False],
        [-1, "fast", 0.5, False],
        [2**63, "fast", 0.5, False],
        [1.0, "fast", 0.5, False],
        ["1", "fast", 0.5, False],
        [1, "fa st", 0.5, False],
        [1, "fast/1", 0.5, False],
        [1, "fast:1", 0.5, False],
        [1, "", 0.5, False],
        [1, "x" * 65, 0.5, False],
        [1, 5, 0.5, False],
        [1, "fast", -0.001, False],
        [1, "fast", MAX_AGE_S + 1, False],
        [1, "fast", "0.5", False],
        [1, "fast", True, False],
        [1, "fast", None, False],
        [1, "fast", 0.5, 0],
        [1, "fast", 0.5, 1],
        [1, "fast", 0.5, "true"],
        [1, "fast", 0.5, None],
    ],
)
def test_bad_event_is_refused_alone(event: Any) -> None:
    body = _body({"reporter": "r", "events": [GOOD, event, [2, "slow", 3, True]]})
    parsed = parse_progress(body)
    assert parsed.refused == 1
    assert parsed.events == [Progress(1, "fast", 0.5, False), Progress(2, "slow", 3.0, True)]


@pytest.mark.parametrize("age", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_age_is_refused_alone(age: str) -> None:
    body = f'{{"reporter":"r","events":[[1,"fast",{age},false],[2,"fast",0.1,true]]}}'.encode()
    parsed = parse_progress(body)
    assert parsed.refused == 1
    assert parsed.events == [Progress(2, "fast", 0.1, True)]


def test_bounds_are_inclusive() -> None:
    body = _body({"reporter": "r", "events": [[0, "x" * 64, 0, False], [1, "a", MAX_AGE_S, True]]})
    parsed = parse_progress(body)
    assert parsed.refused == 0
    assert parsed.events == [Progress(0, "x" * 64, 0.0, False), Progress(1, "a", MAX_AGE_S, True)]
    assert all(type(e.age_s) is float for e in parsed.events)


def test_deep_nesting_is_refused_without_crashing() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    with pytest.raises(ProgressError, match=r"^body:"):
        parse_progress(deep)


def test_deeply_nested_event_is_refused_alone() -> None:
    nested = "[" * 50 + "]" * 50
    body = f'{{"reporter":"r","events":[{nested},[1,"fast",0.5,false]]}}'.encode()
    parsed = parse_progress(body)
    assert parsed.refused == 1
    assert parsed.events == [Progress(1, "fast", 0.5, False)]
