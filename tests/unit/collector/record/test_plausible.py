"""What no real request could be is refused, naming the field: a duration past the bound, a TTFT
past e2e, a start far from the record's arrival; what a real request can be passes."""

from __future__ import annotations

import dataclasses

import pytest

from lanewatch.collector.record.batch import encode_batch, encode_record, parse_batch
from lanewatch.collector.record.itl import ItlStats
from lanewatch.collector.record.plausible import (
    MAX_DURATION_S,
    MAX_START_AGE_S,
    MAX_START_AHEAD_S,
    TTFT_SLACK_S,
    check_plausible,
)
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import RequestTiming
from tests.unit.collector.record.test_batch import tap

NOW = 1_800_000_000.0  # the arrival's wall clock, pinned
YEAR_2500 = 16_725_225_600.0


def at(**kw: object) -> RequestTiming:
    return dataclasses.replace(tap(0), **{"started_at": NOW - 60.0, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"e2e_s": 1e297}, "e2e_s"),  # would poison a histogram's _sum for good
        ({"e2e_s": MAX_DURATION_S * 1.01, "ttft_s": 0.02}, "e2e_s"),
        ({"queue_s": 1e9, "prefill_s": 0.1, "decode_s": 0.1}, "queue_s"),
        ({"dns_s": 86_400.0 * 365}, "dns_s"),
        ({"itl_s": (0.01, MAX_DURATION_S + 1.0)}, "itl_s"),
        ({"itl_s": (0.01,), "itl_stats": ItlStats(10**6, MAX_DURATION_S * 2, 0.01, 0.05)}, "itl_stats.sum_s"),
        ({"ttft_s": 5000.0, "e2e_s": 0.001}, "ttft_s"),  # the first token after the end
        ({"ttfb_s": 2.0, "ttft_s": 0.02, "e2e_s": 0.3}, "ttfb_s"),
        ({"ttft_s": 0.3 + TTFT_SLACK_S * 2, "e2e_s": 0.3}, "ttft_s"),
        ({"prompt_tokens": 100, "cached_prompt_tokens": 101}, "cached_prompt_tokens"),
        ({"started_at": YEAR_2500}, "started_at"),
        ({"started_at": NOW + MAX_START_AHEAD_S + 1.0}, "started_at"),
        ({"started_at": NOW - MAX_START_AGE_S - 1.0}, "started_at"),
    ],
)
def test_what_no_request_could_be_is_refused_naming_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as caught:
        check_plausible(at(**changes), NOW)
    assert caught.value.field == field


def test_what_a_real_request_can_be_passes() -> None:
    check_plausible(at(), NOW)
    check_plausible(at(ttft_s=3600.0, e2e_s=5 * 3600.0), NOW)  # a five-hour stream: long, still real
    check_plausible(at(ttft_s=0.301, e2e_s=0.3), NOW)  # a millisecond of clock rounding
    check_plausible(at(ttft_s=0.02, e2e_s=None), NOW)  # no e2e (a failure): nothing to compare
    check_plausible(at(started_at=NOW + 5.0), NOW)  # the sender's clock a little ahead
    check_plausible(at(started_at=NOW - 6 * 3600.0), NOW)  # a long request, shipped late
    check_plausible(at(started_at=0.0), NOW)  # a start not known (Envoy sent no time) is not judged
    check_plausible(at(started_at=YEAR_2500))  # no arrival time given: the start is not judged


def test_negative_durations_stay_refused_where_every_record_is_built() -> None:
    with pytest.raises(RecordError) as caught:
        at(e2e_s=-0.5)
    assert caught.value.field == "e2e_s"


def test_a_batch_keeps_its_good_records_and_refuses_each_absurd_one_alone() -> None:
    records = [
        tap(0, started_at=NOW - 1),
        tap(1, started_at=NOW - 1, e2e_s=1e297),
        tap(2, started_at=NOW - 1, ttft_s=5000.0, e2e_s=0.001),
        tap(3, started_at=YEAR_2500),
        tap(4, started_at=NOW - 1),
    ]
    parsed = parse_batch(encode_batch(encode_record(r) for r in records), received_at=NOW)
    assert [r.request_id for r in parsed.records] == ["r0", "r4"]
    assert [(x.index, x.field) for x in parsed.refused] == [(1, "e2e_s"), (2, "ttft_s"), (3, "started_at")]
    assert "longer than any request" in parsed.refused[0].reason
