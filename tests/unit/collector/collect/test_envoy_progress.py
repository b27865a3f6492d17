"""Envoy's periodic access-log entries as the fast guard's progress, and the end entry as the last event."""

from __future__ import annotations

from typing import Any

import pytest

from lanewatch.collector.collect.envoy_log import (
    EnvoyLogEntry,
    end_progress,
    is_periodic,
    progress_from_log,
    progress_id,
    record_from_log,
)
from lanewatch.collector.collect.otlp_logs import admit_logs
from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.record.rules import RecordError

RID = "7aec140b-5587-41a3-9706-24de69861569"
# A periodic entry as Envoy 1.40 sent it 1.2 s into a stream whose first body byte had not come
PERIODIC: dict[str, Any] = {
    "access_log_type": "DownstreamPeriodic",
    "upstream_cluster": "slow",
    "upstream_host": "127.0.0.1:8002",
    "response_code": "200",
    "response_flags": "-",
    "ttft_us": "-",
    "ttfb_us": "1586",
    "duration_ms": "1200",
    "request_id": RID,
    "path": "/v1/completions",
}


def entry(**changes: Any) -> EnvoyLogEntry:
    attrs = {**PERIODIC, **changes}
    return EnvoyLogEntry({k: v for k, v in attrs.items() if v is not None}, 1_796_136_333_820_014_000)


def test_a_waiting_stream_is_its_age_and_one_with_its_first_byte_its_ttft() -> None:
    assert is_periodic(entry().attributes)
    assert progress_from_log(entry()) == Progress(progress_id(RID), "slow", 1.2, False)
    first = progress_from_log(entry(ttft_us="1002839", duration_ms="1400"))
    assert first is not None
    assert (first.id, first.lane, first.first_token) == (progress_id(RID), "slow", True)
    assert first.age_s == pytest.approx(1.002839)


def test_the_id_is_stable_and_bounded() -> None:
    assert progress_id(RID) == progress_id(RID) != progress_id(RID + "x")
    assert 0 <= progress_id(RID) < 2**60


def test_end_and_untyped_entries_are_not_periodic() -> None:
    assert not is_periodic(entry(access_log_type="DownstreamEnd").attributes)
    assert not is_periodic(entry(access_log_type=None).attributes)
    assert not is_periodic(entry(access_log_type="-").attributes)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"request_id": "-"}, "request_id"),
        ({"path": "/v1/models"}, "path"),
        ({"duration_ms": "-"}, "duration_ms"),
        ({"duration_ms": "99999999"}, "duration_ms"),
        ({"upstream_cluster": "no lane!"}, "upstream_cluster"),
    ],
)
def test_a_periodic_entry_it_cannot_take_is_refused_naming_the_attribute(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(RecordError, match=field):
        progress_from_log(entry(**changes))


def test_the_end_entry_is_the_requests_last_event() -> None:
    end = entry(access_log_type="DownstreamEnd", ttft_us="2002537", duration_ms="2155")
    last = end_progress(record_from_log(end))
    assert last is not None and (last.id, last.first_token) == (progress_id(RID), True)
    assert last.age_s == pytest.approx(2.002537)
    failed = record_from_log(entry(access_log_type="DownstreamEnd", response_code="503", duration_ms="3000"))
    assert end_progress(failed) == Progress(progress_id(RID), "slow", 3.0, False)
    gone = record_from_log(entry(access_log_type="DownstreamEnd", response_code="0", response_flags="DC"))
    assert end_progress(gone) is None  # the client's own: nothing about the lane
    client = record_from_log(entry(access_log_type="DownstreamEnd", response_code="400", duration_ms="3000"))
    assert end_progress(client) is None
    assert end_progress(record_from_log(entry(request_id="-", access_log_type="DownstreamEnd"))) is None


def test_admission_splits_periodic_entries_from_records() -> None:
    got = admit_logs(
        [
            entry(),
            entry(access_log_type="DownstreamEnd", ttft_us="2002537", duration_ms="2155"),
            entry(request_id="-"),
        ],
        None,
    )
    assert [p.first_token for p in got.progress] == [False]
    assert [r.request_id for r in got.kept] == [RID]
    assert got.invalid == 1 and "request_id" in got.reason
