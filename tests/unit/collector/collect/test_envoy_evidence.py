"""Envoy's entries held to the evidence contract (docs/slo.md): times from the body's end, streams only.

The entries are as Envoy 1.40 logged them on deploy/envoy/access-log.yaml (values measured on
loopback): a streamed request waiting on its first token, a non-streamed one waiting on its whole
answer, and a streamed one whose client held its body 1.5 s.
"""

from __future__ import annotations

from typing import Any

import pytest

from lanewatch.collector.collect.envoy_log import (
    EnvoyLogEntry,
    end_progress,
    progress_from_log,
    progress_id,
    record_from_log,
)
from lanewatch.collector.collect.otlp_logs import admit_logs
from lanewatch.collector.progress.inflight import Progress
from tests.evidence_contract import check_evidence, check_progress

RID = "0f6d1b7e-23c4-4b8e-9a51-0c2f3e4d5a6b"
START_NS = 1_796_136_333_820_014_000
BASE: dict[str, Any] = {
    "upstream_cluster": "fast",
    "upstream_host": "127.0.0.1:8001",
    "response_flags": "-",
    "request_id": RID,
    "path": "/v1/chat/completions",
    "ttft_us": "-",
}
# 0.4 s into a streamed request: its body came in 1.2 ms, the head (text/event-stream) 4 ms later
STREAM_WAITING = {
    **BASE, "access_log_type": "DownstreamPeriodic", "response_code": "200",
    "content_type": "text/event-stream", "ttfb_us": "4180", "upload_us": "1163", "duration_ms": "399",
}  # fmt: skip
# 0.4 s into a non-streamed request: no head before the whole answer
WHOLE_WAITING = {
    **BASE, "access_log_type": "DownstreamPeriodic", "response_code": "0",
    "content_type": "-", "ttfb_us": "-", "upload_us": "124", "duration_ms": "403",
}  # fmt: skip
# 1.0 s into a request whose client still sends its body
UPLOADING = {
    **BASE, "access_log_type": "DownstreamPeriodic", "response_code": "0",
    "content_type": "-", "ttfb_us": "-", "upload_us": "-", "duration_ms": "1004",
}  # fmt: skip
# the non-streamed answer's end: its first body byte is its whole answer, 1.008 s after the body
WHOLE_END = {
    **BASE, "access_log_type": "DownstreamEnd", "response_code": "200",
    "content_type": "application/json; charset=utf-8", "ttft_us": "1007648", "ttfb_us": "1007562",
    "upload_us": "124", "duration_ms": "1007",
}  # fmt: skip
# the 1.5 s upload's end: its first token came 21 ms after the body's last byte
UPLOAD_END = {
    **BASE, "access_log_type": "DownstreamEnd", "response_code": "200",
    "content_type": "text/event-stream", "ttft_us": "21022", "ttfb_us": "429",
    "upload_us": "1500087", "duration_ms": "1521",
}  # fmt: skip


def entry(attrs: dict[str, Any]) -> EnvoyLogEntry:
    return EnvoyLogEntry(attrs, START_NS)


def test_a_waiting_streams_age_counts_from_its_bodys_end() -> None:
    event = progress_from_log(entry(STREAM_WAITING))
    assert event is not None and event.age_s == pytest.approx(0.399 - 0.001163)
    assert event == Progress(progress_id(RID), "fast", event.age_s, False)


def test_a_non_streamed_or_uploading_request_yields_no_event() -> None:
    assert progress_from_log(entry(WHOLE_WAITING)) is None
    assert progress_from_log(entry(UPLOADING)) is None
    got = admit_logs([entry(WHOLE_WAITING), entry(UPLOADING)], max_records=None)
    assert got.progress == [] and got.kept == [] and got.rejected == 0


def test_a_non_streamed_answers_record_has_no_ttft_and_judges_nothing() -> None:
    record = record_from_log(entry(WHOLE_END))
    assert record.ttft_s is None and record.e2e_s == pytest.approx(1.007 - 0.000124)
    assert (
        check_evidence(record, streamed=False, upload_s=0.0, upstream_first_token_s=None, tolerance_s=0.05)
        == []
    )
    assert end_progress(record) is None


def test_an_uploads_record_counts_from_the_bodys_end() -> None:
    record = record_from_log(entry(UPLOAD_END))
    assert record.ttft_s == pytest.approx(0.021022)
    assert record.e2e_s == pytest.approx(1.521 - 1.500087)  # %DURATION% is whole ms
    assert record.started_at == pytest.approx(START_NS / 1e9 + 1.500087)
    breaches = check_evidence(
        record, streamed=True, upload_s=1.5, upstream_first_token_s=0.018, tolerance_s=0.05
    )
    assert breaches == []
    last = end_progress(record)
    assert last is not None
    assert (
        check_progress([last], streamed=True, upload_s=1.5, upstream_first_token_s=0.018, tolerance_s=0.05)
        == []
    )


def test_an_end_entry_whose_body_never_ended_has_no_e2e() -> None:
    # The upstream answered 413 before the body's end: Envoy reset the client, DS_RX_END never came.
    early = {**UPLOAD_END, "response_code": "413", "content_type": "application/json", "ttft_us": "-",
             "ttfb_us": "-", "upload_us": "-", "duration_ms": "1"}  # fmt: skip
    record = record_from_log(entry(early))
    assert record.e2e_s is None and record.ttft_s is None
    assert end_progress(record) is None
