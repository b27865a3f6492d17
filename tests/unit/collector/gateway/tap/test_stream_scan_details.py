"""What the tap keeps beyond timing: vLLM's per-request metrics and the bytes of an error."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from lanewatch.collector.gateway.tap.content_tap import ContentTap
from lanewatch.collector.gateway.tap.stream_scan import StreamTap
from lanewatch.collector.openai_api.error_detail import error_detail
from lanewatch.collector.openai_api.response_metrics import parse_metrics

METRICS = {
    "time_to_first_token_ms": 40.0,
    "generation_time_ms": 90.0,
    "queue_time_ms": 5.0,
    "mean_itl_ms": 10.0,
    "tokens_per_second": 76.9,
}


def _ev(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _stream(with_metrics: bool = True) -> bytes:
    usage: dict[str, object] = {
        "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    if with_metrics:
        usage["metrics"] = METRICS
    return (
        _ev({"choices": [{"index": 0, "delta": {"content": "a"}}]})
        + _ev({"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": "length"}]})
        + _ev(usage)
        + b"data: [DONE]\n\n"
    )


def _feed(tap: StreamTap, data: bytes, cuts: list[int]) -> bytes:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out = b""
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        out += tap.feed(data[a:b])[0]
    return out + tap.flush()


@settings(max_examples=100, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0), max_size=12), strip=st.booleans())
def test_metrics_on_the_usage_chunk_are_read_however_the_stream_is_cut(cuts: list[int], strip: bool) -> None:
    tap = StreamTap("chat", sse=True, strip_usage=strip)
    out = _feed(tap, _stream(), cuts)
    assert tap.metrics == parse_metrics(METRICS)
    assert tap.completion_tokens == 2 and not tap.stream_error and tap.error_bytes is None
    assert (b'"metrics"' in out) is not strip  # cut out with the usage event the gateway asked for


def test_no_metrics_without_the_option() -> None:
    tap = StreamTap("chat", sse=True)
    _feed(tap, _stream(with_metrics=False), [])
    assert tap.metrics is None


def test_a_json_body_with_metrics_split_across_reads() -> None:
    body = json.dumps({
        "choices": [{"index": 0, "message": {"content": "x" * 3000}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        "metrics": METRICS,
    }).encode()  # fmt: skip
    for tap_type in (StreamTap, ContentTap):
        tap = tap_type("chat", sse=False)
        _feed(tap, body, [len(body) - 60, len(body) - 20])
        assert tap.metrics == parse_metrics(METRICS), tap_type


def test_an_sse_error_frame_keeps_its_bytes_for_the_message() -> None:
    frame = _ev({"error": {"message": "engine died; Bearer abc123", "type": "InternalServerError"}})
    tap = StreamTap("chat", sse=True)
    _feed(tap, _ev({"choices": [{"index": 0, "delta": {"content": "a"}}]}) + frame + b"data: [DONE]\n\n", [7])
    assert tap.stream_error and tap.error_bytes is not None
    assert error_detail(tap.error_bytes) == "engine died; Bearer [redacted]"


def test_a_json_error_body_keeps_its_start() -> None:
    body = json.dumps(
        {
            "error": {
                "message": "maximum context length is 2048 tokens",
                "type": "BadRequestError",
                "code": 400,
            }
        }
    ).encode()
    tap = StreamTap("chat", sse=False)
    _feed(tap, body, [10])
    assert tap.error_bytes is not None
    assert error_detail(tap.error_bytes) == "maximum context length is 2048 tokens"


def test_error_as_a_value_is_not_an_error_frame() -> None:
    content = _ev({"choices": [{"index": 0, "delta": {"content": "error"}, "finish_reason": None}]})
    spaced = b'data: {"choices": [{"index": 0, "text": "error", "finish_reason": "error"}]}\n\n'
    for api, stream in (("chat", content), ("completions", spaced)):
        tap = StreamTap(api, sse=True)  # type: ignore[arg-type]
        _feed(tap, stream + b"data: [DONE]\n\n", [9])
        assert not tap.stream_error and tap.error_bytes is None, api
    body = json.dumps({"choices": [{"message": {"content": "error"}}], "usage": {"completion_tokens": 1}})
    tap = StreamTap("chat", sse=False)
    _feed(tap, body.encode(), [12])
    assert not tap.stream_error and tap.error_bytes is None


def test_an_error_object_without_an_error_key_is_an_error_frame() -> None:
    frame = _ev({"object": "error", "message": "out of memory", "type": "InternalServerError", "code": 500})
    for spaced in (frame, frame.replace(b'":', b'": ')):
        tap = StreamTap("chat", sse=True)
        _feed(tap, spaced + b"data: [DONE]\n\n", [4])
        assert tap.stream_error and tap.error_bytes is not None
        assert error_detail(tap.error_bytes) == "out of memory"


def test_a_blank_line_split_across_reads_after_a_long_held_tail_still_ends_its_event() -> None:
    event = b'data: {"choices":[{"delta":{"content":"' + b"x" * 200_000 + b'"}}]}'
    for ending in (b"\n\n", b"\n\r\n", b"\r\n\r\n"):
        for cut in range(1, len(ending)):
            tap = StreamTap("chat", sse=True, strip_usage=True)  # strip: the tap holds what is incomplete
            out = b""
            for i in range(0, len(event), 65536):  # a long event: its start held as the tail
                out += tap.feed(event[i : i + 65536])[0]
            sent, n = tap.feed(ending[:cut])
            more, m = tap.feed(ending[cut:] + b"data: [DONE]\n\n")
            assert n + m == 1 and tap.done and not tap.bad_stream, (ending, cut)
            assert out + sent + more == event + ending + b"data: [DONE]\n\n"
