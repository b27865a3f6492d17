"""One fan-out for every record: each sink gets each record, and one that fails stops nothing."""

from __future__ import annotations

import logging

import pytest

from lanewatch.collector.record.builder import RecordBuilder
from lanewatch.collector.record.sink import FanOut
from lanewatch.collector.record.timing import RequestTiming


def _record() -> RequestTiming:
    return RecordBuilder(source="tap", target="t", lane="fast", request_class="short", model="m").build()


def test_every_sink_gets_every_record_in_order_and_a_failing_one_is_logged_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    got: list[tuple[str, RequestTiming]] = []

    def full_disk(record: RequestTiming) -> None:
        raise OSError(28, "No space left on device")

    fan = FanOut([lambda r: got.append(("first", r)), full_disk])
    fan.add(lambda r: got.append(("added", r)))
    record = _record()
    with caplog.at_level(logging.ERROR):
        fan(record)
    assert got == [("first", record), ("added", record)]
    assert "full_disk" in caplog.text and "No space left on device" in caplog.text
    assert "Traceback" not in caplog.text  # an OSError is one line a record


def test_a_sink_that_raises_a_bug_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    def broken(record: RequestTiming) -> None:
        raise KeyError("lane")

    with caplog.at_level(logging.ERROR):
        FanOut([broken])(_record())
    assert any(r.exc_info for r in caplog.records)
