"""The record stage: what one finished exchange's record says, from its decision, leg and tap."""

from __future__ import annotations

import json
from typing import Any

from lanewatch.collector.degrade_state.state import Decision
from lanewatch.collector.gateway.tap.record import tap_record
from lanewatch.collector.gateway.tap.stream_scan import StreamTap
from lanewatch.collector.gateway.upstream.exchange import Exchange
from lanewatch.collector.record.timing import ErrorKind


def _ev(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _exchange(**kw: Any) -> Exchange:
    decision = Decision(routed_lane="slow", served_lane="fast", actions=("shift",))
    return Exchange("chat", 100.0, 1_700_000_000.0, "interactive", "m", decision, ("shift",), **kw)


def test_a_streamed_answer_becomes_a_tap_record_timed_from_arrival() -> None:
    ex = _exchange(status=200, end=100.5)
    tap = ex.tap = StreamTap("chat", sse=True)
    for i, t in enumerate((100.1, 100.2, 100.3)):
        chunk = {"choices": [{"index": 0, "delta": {"content": f"w{i}"}, "finish_reason": None}]}
        _out, n = tap.feed(_ev(chunk))
        tap.content_written(t, n)
    tap.feed(_ev({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}))
    record = tap_record(ex)
    assert (record.source, record.lane, record.request_class, record.model) == (
        "tap",
        "fast",
        "interactive",
        "m",
    )
    assert record.attrs["routed_lane"] == "slow" and record.attrs["degraded"] == "shift"
    assert record.ttft_s is not None and abs(record.ttft_s - 0.1) < 1e-9
    assert record.e2e_s is not None and abs(record.e2e_s - 0.5) < 1e-9
    assert (record.output_tokens, record.tokens_from_usage, record.prompt_tokens) == (3, True, 7)


def test_a_request_that_failed_before_its_answer_keeps_the_gateways_reason() -> None:
    ex = _exchange(error=ErrorKind.CONNECT, error_message="upstream fast: refused", end=100.01)
    record = tap_record(ex)
    assert record.error is ErrorKind.CONNECT and record.error_message == "upstream fast: refused"
    assert record.ttft_s is None and record.target == "fast"  # no upstream took it: the lane
