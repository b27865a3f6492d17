"""The judge: each request once against its lane's TTFT threshold, at first token or by age."""

from __future__ import annotations

from typing import Any

import pytest

from lanewatch.collector.guard.judge import Judge
from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.record.timing import ErrorKind, RequestTiming

THRESHOLDS = {"fast": 1.0, "slow": 5.0}


def _record(**fields: Any) -> RequestTiming:
    fields.setdefault("lane", "fast")
    return RequestTiming(source="envoy", target="t", request_class="c", model="m", **fields)


def test_first_token_within_threshold_is_met() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.progress("r", Progress(1, "fast", 0.4, True), 0.0) == "met"
    assert judge.progress("r", Progress(2, "fast", 1.0, True), 0.0) == "met"  # at the threshold


def test_first_token_over_threshold_is_missed() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.progress("r", Progress(1, "fast", 1.01, True), 0.0) == "missed"
    assert judge.progress("r", Progress(2, "slow", 1.01, True), 0.0) == "met"  # the lane's own


def test_waiting_under_threshold_is_not_judged_yet() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.progress("r", Progress(1, "fast", 0.5, False), 0.0) is None
    assert judge.progress("r", Progress(1, "fast", 1.0, False), 0.5) is None
    assert judge.progress("r", Progress(1, "fast", 0.9, True), 0.6) == "met"  # still judged after


def test_waiting_over_threshold_is_missed_once_and_its_first_token_adds_nothing() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.progress("r", Progress(1, "fast", 1.2, False), 0.0) == "missed"
    assert judge.progress("r", Progress(1, "fast", 1.5, False), 0.3) is None
    assert judge.progress("r", Progress(1, "fast", 1.7, True), 0.5) is None


def test_first_token_is_judged_once() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.progress("r", Progress(1, "fast", 0.2, True), 0.0) == "met"
    assert judge.progress("r", Progress(1, "fast", 0.2, True), 0.1) is None


def test_same_id_from_another_reporter_is_judged_separately() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.progress("a", Progress(1, "fast", 2.0, False), 0.0) == "missed"
    assert judge.progress("b", Progress(1, "fast", 0.5, True), 0.0) == "met"
    assert judge.progress("b", Progress(1, "fast", 0.5, True), 0.0) is None


def test_unknown_lane_is_counted_and_not_judged() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.progress("r", Progress(1, "other", 99.0, True), 0.0) is None
    assert judge.record(_record(lane="other", ttft_s=99.0)) is None
    assert judge.unknown_lane == 2
    assert judge.progress("r", Progress(2, "fast", 99.0, True), 0.0) == "missed"
    assert judge.unknown_lane == 2


def test_record_with_ttft_is_met_or_missed() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.record(_record(ttft_s=0.5, e2e_s=9.0)) == "met"
    assert judge.record(_record(ttft_s=1.0)) == "met"
    assert judge.record(_record(ttft_s=1.5, e2e_s=2.0)) == "missed"
    # a record is not remembered: each is its own request
    assert judge.record(_record(ttft_s=1.5, e2e_s=2.0)) == "missed"


def test_record_failed_without_ttft_after_threshold_is_missed() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.record(_record(error=ErrorKind.HTTP_5XX, status=503, e2e_s=1.5)) == "missed"
    assert judge.record(_record(error=ErrorKind.TTFT_TIMEOUT, e2e_s=30.0)) == "missed"
    assert judge.record(_record(error=ErrorKind.CONNECT_TIMEOUT, e2e_s=2.0)) == "missed"


def test_record_fast_failure_is_not_judged() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.record(_record(error=ErrorKind.HTTP_5XX, status=500, e2e_s=0.2)) is None
    assert judge.record(_record(error=ErrorKind.CONNECT_REFUSED, e2e_s=1.0)) is None  # at threshold
    assert judge.record(_record(error=ErrorKind.CONNECT_REFUSED)) is None  # no duration


def test_record_without_ttft_or_error_is_not_judged() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.record(_record(status=200, e2e_s=30.0)) is None


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ErrorKind.HTTP_4XX, 400),
        (ErrorKind.HTTP_4XX, 404),
        (ErrorKind.HTTP_4XX, 413),
        (ErrorKind.HTTP_4XX, 422),
        (ErrorKind.HTTP_4XX, 401),
        (ErrorKind.CLIENT_DISCONNECT, None),
        (ErrorKind.CLIENT_DISCONNECT, 200),
        (ErrorKind.TRUNCATED, 408),  # any 4xx status, whatever the kind
    ],
)
def test_client_errors_are_never_judged(error: ErrorKind, status: int | None) -> None:
    judge = Judge(THRESHOLDS)
    assert judge.record(_record(error=error, status=status, e2e_s=60.0)) is None


def test_a_429_is_judged_by_how_long_it_took() -> None:
    judge = Judge(THRESHOLDS)
    assert judge.record(_record(error=ErrorKind.HTTP_429, status=429, e2e_s=60.0)) == "missed"
    assert judge.record(_record(error=ErrorKind.HTTP_429, status=429, e2e_s=0.01)) is None


def test_remembered_keys_are_bounded() -> None:
    judge = Judge(THRESHOLDS, max_keys=3)
    for rid in range(1, 5):  # 1 is pushed out by 4
        assert judge.progress("r", Progress(rid, "fast", 2.0, False), 0.0) == "missed"
    assert judge.progress("r", Progress(4, "fast", 2.0, True), 0.0) is None
    assert judge.progress("r", Progress(2, "fast", 2.0, True), 0.0) is None
    assert judge.progress("r", Progress(1, "fast", 2.0, True), 0.0) == "missed"  # forgotten


def test_remembered_keys_expire_after_remember_s() -> None:
    judge = Judge(THRESHOLDS, remember_s=10.0)
    assert judge.progress("r", Progress(1, "fast", 2.0, False), 0.0) == "missed"
    assert judge.progress("r", Progress(2, "fast", 2.0, False), 9.0) == "missed"
    assert judge.progress("r", Progress(3, "fast", 2.0, False), 10.5) == "missed"  # 1 expires
    assert judge.progress("r", Progress(2, "fast", 0.5, True), 10.5) is None  # 2 is kept
    assert judge.progress("r", Progress(1, "fast", 0.5, True), 10.5) == "met"
