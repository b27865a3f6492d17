from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from lanewatch.collector.gateway.tap.content_tap import MAX_JSON_BODY, ContentTap
from lanewatch.collector.gateway.tap.stream_scan import StreamTap
from lanewatch.collector.record.content import MAX_CONTENT_BYTES, TRUNCATED_MARKER

from .test_stream_scan import STREAM, TRICKY, USAGE, _chat, _ev


def _feed(tap: StreamTap, data: bytes, cuts: list[int]) -> bytes:
    out, prev = [], 0
    for cut in [*sorted(set(cuts)), len(data)]:
        out.append(tap.feed(data[prev:cut])[0])
        prev = cut
    out.append(tap.flush())
    return b"".join(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=12), st.booleans())
def test_any_split_keeps_the_text_and_passes_the_same_bytes(cuts: list[int], strip: bool) -> None:
    plain, kept = (
        StreamTap("chat", sse=True, strip_usage=strip),
        ContentTap("chat", sse=True, strip_usage=strip),
    )
    assert _feed(kept, STREAM, cuts) == _feed(plain, STREAM, cuts)
    assert kept.content.text() == "".join(TRICKY)  # text that looks like the tap's patterns is text
    assert (kept.prompt_tokens, kept.completion_tokens, kept.done) == (12, 5, True)


def test_finish_reason_and_completions_text() -> None:
    tap = ContentTap("completions", sse=True)
    events = [
        _ev({"choices": [{"index": 0, "text": "Once "}]}),
        _ev({"choices": [{"index": 0, "text": "upon", "finish_reason": "length"}]}, spaced=True),
        b"data: [DONE]\n\n",
    ]
    _feed(tap, b"".join(events), [])
    assert (tap.content.text(), tap.content.finish_reason) == ("Once upon", "length")


def test_a_long_stream_is_truncated() -> None:
    tap = ContentTap("chat", sse=True)
    _feed(tap, b"".join(_ev(_chat("x" * 1000)) for _ in range(40)) + USAGE, [])
    text = tap.content.text()
    assert text.endswith(TRUNCATED_MARKER) and len(text.encode()) <= MAX_CONTENT_BYTES


def test_a_non_streamed_body_is_read_at_its_end() -> None:
    body = json.dumps(
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "It rains."},
                    "finish_reason": "stop",
                }
            ]
        }
    ).encode()
    tap = ContentTap("chat", sse=False)
    assert _feed(tap, body, [5, 17]) == body
    assert (tap.content.text(), tap.content.finish_reason) == ("It rains.", "stop")


def test_a_non_streamed_body_over_the_limit_leaves_the_marker_only() -> None:
    tap = ContentTap("chat", sse=False)
    body = b'{"choices":[{"message":{"content":"' + b"x" * MAX_JSON_BODY + b'"}}]}'
    _feed(tap, body, [1000])
    assert tap.content.text() == TRUNCATED_MARKER
