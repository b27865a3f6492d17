"""LiteLLM's standard logging payload -> RequestTiming (integrations/litellm/records.py), and the
handler's settings and shipping, without LiteLLM: the pure parts import in lanewatch's own venv."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lanewatch.collector.record.batch import parse_batch
from lanewatch.collector.record.timing import ErrorKind
from lanewatch.integrations.litellm import UNROUTED, load_settings, record_of
from lanewatch.integrations.litellm.settings import settings_from
from lanewatch.integrations.litellm.shipping import RecordShipper

LANES = {"fast": "fast", "slow-deployment": "slow"}


def payload(**over: Any) -> dict[str, Any]:
    """A streamed success as LiteLLM writes it (the fields the record reads)."""
    base: dict[str, Any] = {
        "call_type": "acompletion",
        "status": "success",
        "stream": True,
        "startTime": 1_700_000_000.0,
        "completionStartTime": 1_700_000_000.25,
        "endTime": 1_700_000_001.0,
        "model_group": "fast",
        "model_id": "fast-deployment",
        "prompt_tokens": 9,
        "completion_tokens": 12,
        "litellm_call_id": "call-1",
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "error_str": None,
        "error_information": None,
    }
    return base | over


def test_a_streamed_success_is_a_record_with_its_ttft_lane_and_tokens() -> None:
    r = record_of(payload(), LANES, "litellm", "other")
    assert r is not None
    assert (r.source, r.lane, r.model, r.api, r.status, r.error) == (
        "litellm",
        "fast",
        "fast",
        "chat",
        200,
        None,
    )
    assert (r.ttft_s, r.e2e_s, r.started_at) == (0.25, 1.0, 1_700_000_000.0)
    assert (r.prompt_tokens, r.output_tokens, r.tokens_from_usage) == (9, 12, True)
    assert (r.request_id, r.trace_id, r.attrs) == (
        "call-1",
        payload()["trace_id"],
        {"deployment": "fast-deployment"},
    )


def test_the_usage_object_is_read_by_the_one_usage_reader_cached_tokens_and_all() -> None:
    usage = {"prompt_tokens": 200, "completion_tokens": 12, "prompt_tokens_details": {"cached_tokens": 192}}
    r = record_of(payload(metadata={"usage_object": usage}), LANES, "litellm", "other")
    assert r is not None
    assert (r.prompt_tokens, r.cached_prompt_tokens, r.output_tokens) == (200, 192, 12)
    # Without the object (an older LiteLLM), the top-level counts, and no cached count to claim.
    bare = record_of(payload(metadata={"usage_object": None}), LANES, "litellm", "other")
    assert bare is not None and (bare.prompt_tokens, bare.cached_prompt_tokens) == (9, None)


def test_the_bodys_end_starts_the_clock_when_it_is_earlier() -> None:
    r = record_of(payload(), LANES, "litellm", "other", body_at=1_699_999_999.95)
    assert r is not None and r.started_at == 1_699_999_999.95
    assert r.ttft_s == pytest.approx(0.30) and r.e2e_s == pytest.approx(1.05)
    later = record_of(payload(), LANES, "litellm", "other", body_at=1_700_000_000.1)
    assert later is not None and later.ttft_s == 0.25  # a stamp after LiteLLM's start is no stamp


def test_the_first_content_chunk_ends_the_ttft_not_litellms_first_chunk() -> None:
    # completionStartTime (0.25 s after the start) was a role chunk; the text came 0.5 s after
    r = record_of(payload(), LANES, "litellm", "other", first_at=1_700_000_000.5)
    assert r is not None and r.ttft_s == 0.5
    plain = record_of(payload(stream=False), LANES, "litellm", "other", first_at=1_700_000_000.5)
    assert plain is not None and plain.ttft_s is None  # no stream: no observable first token


def test_the_lane_comes_from_the_group_then_the_deployment_else_unrouted() -> None:
    by_deployment = record_of(payload(model_group="x", model_id="slow-deployment"), LANES, "t", "c")
    neither = record_of(payload(model_group="x", model_id="y"), LANES, "t", "c")
    assert by_deployment is not None and by_deployment.lane == "slow"
    assert neither is not None and neither.lane == UNROUTED


def test_a_failure_carries_its_status_kind_and_message_and_no_ttft_before_a_chunk() -> None:
    failed = payload(
        status="failure",
        completionStartTime=1_700_000_001.0,
        error_str="litellm.RateLimitError: slow down",
        error_information={"error_code": "429"},
    )
    r = record_of(failed, LANES, "litellm", "other")
    assert r is not None
    assert (r.status, r.error, r.ttft_s, r.output_tokens) == (429, ErrorKind.HTTP_429, None, None)
    assert r.error_message == "litellm.RateLimitError: slow down"
    odd = record_of(failed | {"error_information": {"error_code": "None"}}, LANES, "l", "o")
    assert odd is not None and (odd.status, odd.error) == (None, ErrorKind.OTHER)


def test_no_ttft_without_a_stream_no_record_for_embeddings_and_no_uuid_as_trace_id() -> None:
    plain = record_of(payload(stream=False, trace_id="3f2c-uuid"), LANES, "l", "o")
    assert plain is not None and (plain.ttft_s, plain.e2e_s, plain.trace_id) == (None, 1.0, None)
    assert record_of(payload(call_type="aembedding"), LANES, "l", "o") is None
    text = record_of(payload(call_type="atext_completion"), LANES, "l", "o")
    assert text is not None and text.api == "completions"


def test_settings_read_from_the_file_the_environment_names(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"collector_url": "http://c:1", "lanes": {"a": "fast"}, "token_file": "/t"}))
    s = load_settings({"LANEWATCH_LITELLM_CONFIG": str(path)})
    assert (s.collector_url, dict(s.lanes), s.token_file) == ("http://c:1", {"a": "fast"}, Path("/t"))
    assert load_settings({}).collector_url is None
    with pytest.raises(ValueError, match="colector_url"):
        settings_from({"colector_url": "x"})
    with pytest.raises(ValueError, match="positive"):
        settings_from({"queue_records": 0})


class FakePost:
    """Answers each POST with the next scripted status; keeps the bodies."""

    def __init__(self, *statuses: int | None) -> None:
        self.statuses = list(statuses)
        self.bodies: list[bytes] = []

    def __call__(
        self, url: str, body: bytes, headers: dict[str, str], timeout_s: float
    ) -> tuple[int | None, bytes]:
        assert headers["Authorization"] == "Bearer tok" and url == "http://c/v1/records"
        self.bodies.append(body)
        status = self.statuses.pop(0)
        return status, b'{"accepted": 1, "refused_count": 0}' if status == 200 else b""


def shipper(post: FakePost, queue_records: int = 3) -> RecordShipper:
    return RecordShipper("http://c/", "tok", queue_records=queue_records, batch_records=2, post=post)


def test_a_full_queue_drops_the_oldest_and_counts_it() -> None:
    post = FakePost(200, 200)
    s = shipper(post)
    s._thread = object()  # type: ignore[assignment]  # no thread: send_once is driven by hand
    records = [record_of(payload(litellm_call_id=f"c{i}"), LANES, "l", "o") for i in range(4)]
    for r in records:
        assert r is not None
        s.append(r)
    assert (s.queued, s.stats.dropped["queue_full"]) == (3, 1)
    assert s.send_once() and s.send_once()
    sent = [json.loads(b)["records"] for b in post.bodies]
    assert [x["request_id"] for batch in sent for x in batch] == ["c1", "c2", "c3"]
    assert s.stats.shipped == 3


def test_no_answer_puts_the_batch_back_and_a_refusal_drops_it() -> None:
    post = FakePost(None, 503, 200, 400)
    s = shipper(post, queue_records=10)
    s._thread = object()  # type: ignore[assignment]
    for i in range(2):
        r = record_of(payload(litellm_call_id=f"c{i}"), LANES, "l", "o")
        assert r is not None
        s.append(r)
    assert not s.send_once() and not s.send_once()
    assert (s.queued, s.stats.send_failures) == (2, 2)
    assert s.send_once() and s.stats.shipped == 2
    r = record_of(payload(), LANES, "l", "o")
    assert r is not None
    s.append(r)
    assert s.send_once() and s.stats.dropped["rejected"] == 1


def test_a_sent_batch_is_what_the_collector_parses_with_stable_ids() -> None:
    post = FakePost(200)
    s = shipper(post)
    s._thread = object()  # type: ignore[assignment]
    r = record_of(payload(), LANES, "litellm", "other")
    assert r is not None
    s.append(r)
    s.append(r)
    assert s.send_once()
    parsed = parse_batch(post.bodies[0])
    assert parsed.records == [r, r] and not parsed.refused
    assert parsed.ids[0] == parsed.ids[1]  # the same record names itself the same way every time


def test_too_early_is_retried_and_a_batch_stays_under_its_bytes_as_the_gateways() -> None:
    post = FakePost(425, 200, 200)
    records = [record_of(payload(litellm_call_id=f"c{i}"), LANES, "l", "o") for i in range(2)]
    size = max(len(json.dumps(r.to_json())) for r in records if r is not None)
    s = RecordShipper("http://c/", "tok", batch_records=2, batch_bytes=int(size * 1.5), post=post)
    s._thread = object()  # type: ignore[assignment]
    for r in records:
        assert r is not None
        s.append(r)
    assert not s.send_once() and s.queued == 2  # 425: the collector may take it later (it was dropped)
    assert s.send_once() and s.send_once() and s.stats.shipped == 2
    assert [len(json.loads(b)["records"]) for b in post.bodies] == [1, 1, 1]  # one record fits the bound


def test_the_thread_ships_and_close_sends_what_is_left() -> None:
    post = FakePost(200)
    s = RecordShipper("http://c", "tok", batch_records=50, interval_s=30, post=post)
    r = record_of(payload(), LANES, "l", "o")
    assert r is not None
    s.append(r)
    s.close(timeout_s=10)
    assert (s.stats.shipped, s.queued, s.stats.dropped["shutdown"]) == (1, 0, 0)
