"""vLLM's per-request metrics read off a response, and how they become a record's phases."""

from __future__ import annotations

import json

import pytest

from lanewatch.collector.openai_api.response_metrics import (
    ResponseMetrics,
    metrics_in,
    parse_metrics,
    with_response_metrics,
)
from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.join import Joiner
from lanewatch.collector.record.timing import RequestTiming

# As vLLM 0.32 writes the final usage chunk with --enable-per-request-metrics (nulls left out).
METRICS = {
    "time_to_first_token_ms": 40.0,
    "generation_time_ms": 90.0,
    "queue_time_ms": 5.0,
    "mean_itl_ms": 10.0,
    "tokens_per_second": 76.9,
}
USAGE_CHUNK = (
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"tiny","choices":[],'
    '"usage":{"prompt_tokens":7,"total_tokens":17,"completion_tokens":10},'
    f'"metrics":{json.dumps(METRICS)}}}\n\n'
)
TRACE = "0af7651916cd43dd8448eb211c80319c"


def record(**kw: object) -> RequestTiming:
    base: dict[str, object] = {
        "source": "tap", "target": "t", "lane": "fast", "request_class": "short", "model": "tiny",
        "trace_id": TRACE, "status": 200, "ttft_s": 0.06, "e2e_s": 0.2,
    }  # fmt: skip
    base.update(kw)
    return RequestTiming(**base)  # type: ignore[arg-type]


def test_parse_converts_to_seconds_and_keeps_throughput() -> None:
    m = parse_metrics(METRICS)
    assert m == ResponseMetrics(
        queue_s=0.005, ttft_s=0.04, generation_s=0.09, mean_itl_s=0.01, tokens_per_s=76.9
    )


@pytest.mark.parametrize("obj", [None, {}, [], {"time_to_first_token_ms": None}, {"queue_time_ms": "5"}])
def test_no_usable_metrics_is_none(obj: object) -> None:
    assert parse_metrics(obj) is None


def test_bad_numbers_are_dropped_not_kept() -> None:
    m = parse_metrics({"queue_time_ms": -1, "time_to_first_token_ms": True, "generation_time_ms": 3})
    assert m == ResponseMetrics(generation_s=0.003)


def test_found_in_raw_bytes_even_with_nested_speculative_stats() -> None:
    assert metrics_in(USAGE_CHUNK.encode()) == parse_metrics(METRICS)
    nested = dict(METRICS, speculative_decoding={"mean_acceptance_length": 2.0, "acceptance_histogram": [1]})
    assert metrics_in(f'{{"usage":{{}},"metrics":{json.dumps(nested)}}}'.encode()) == parse_metrics(METRICS)


def test_generated_text_cannot_fake_the_key() -> None:
    text = json.dumps({"choices": [{"delta": {"content": '"metrics":{"queue_time_ms":1}'}}]})
    assert metrics_in(text.encode()) is None
    assert metrics_in(b'"metrics":{"queue_time_ms":1') is None  # cut short


def test_a_record_gets_the_phases_from_the_response_when_no_span_gave_them() -> None:
    r = with_response_metrics(record(), parse_metrics(METRICS))
    assert (r.queue_s, r.prefill_s, r.decode_s, r.phases_source) == (0.005, 0.04, 0.09, "response")
    assert (r.response_ttft_s, r.response_mean_itl_s, r.response_tokens_per_s) == (0.04, 0.01, 76.9)
    assert RequestTiming.from_json(json.loads(json.dumps(r.to_json()))) == r


def test_a_span_is_not_overwritten_and_partial_metrics_give_no_phases() -> None:
    joined = record().with_server_phases(0.001, 0.002, 0.003)
    r = with_response_metrics(joined, parse_metrics(METRICS))
    assert (r.queue_s, r.prefill_s, r.decode_s, r.phases_source) == (0.001, 0.002, 0.003, "span")
    assert r.response_queue_s == 0.005
    partial = with_response_metrics(record(), ResponseMetrics(queue_s=0.005))
    assert partial.queue_s is None and partial.phases_source is None and partial.response_queue_s == 0.005


def test_response_phases_still_wait_for_the_span_which_replaces_them() -> None:
    joiner = Joiner(wait_s=5.0, max_pending=10)
    r = with_response_metrics(record(), parse_metrics(METRICS))
    assert joiner.add_record(r, now=0.0) == []  # held for its span
    (out,) = joiner.add_span(ServerSpan(TRACE, queue_s=0.004, prefill_s=0.041, decode_s=0.089), now=0.1)
    assert (out.queue_s, out.prefill_s, out.decode_s, out.phases_source) == (0.004, 0.041, 0.089, "span")
    assert out.response_queue_s == 0.005  # what the response said stays beside it
