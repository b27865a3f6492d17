from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lanewatch.collector.gateway.tap.stream_scan import StreamTap


def _ev(obj: Any, spaced: bool = False) -> bytes:
    text = json.dumps(obj) if spaced else json.dumps(obj, separators=(",", ":"))
    return b"data: " + text.encode() + b"\n\n"


def _chat(content: str | None, role: bool = False) -> dict[str, Any]:
    delta: dict[str, Any] = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


USAGE = _ev(
    {"id": "c", "choices": [], "usage": {"prompt_tokens": 12, "total_tokens": 17, "completion_tokens": 5}}
)
# Texts that look like the patterns the tap searches for: JSON escaping must keep them text.
TRICKY = [
    '"content":"x"',
    "data: [DONE]",
    "\n\ndata: [DONE]\n\n",
    '"usage":{"completion_tokens":99}',
    '"error"',
    '"error": 1',
    "error",  # a whole token's text: the bytes `"error"` as a value, not a key
    "object",
]
STREAM = b"".join(
    [
        _ev(_chat("", role=True)),
        *(_ev(_chat(t)) for t in TRICKY),
        _ev(_chat(None)),  # finish chunk without content
        USAGE,
        b"data: [DONE]\n\n",
    ]
)


def _run(stream: bytes, cuts: list[int], strip: bool) -> tuple[StreamTap, bytes, int]:
    tap = StreamTap("chat", sse=True, strip_usage=strip)
    out, n, prev = [], 0, 0
    for cut in [*sorted(set(cuts)), len(stream)]:
        data, k = tap.feed(stream[prev:cut])
        out.append(data)
        if k:
            tap.content_written(float(cut), k)
        n += k
        prev = cut
    out.append(tap.flush())
    return tap, b"".join(out), n


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=12), st.booleans())
def test_any_split_counts_the_same(cuts: list[int], strip: bool) -> None:
    tap, out, n = _run(STREAM, cuts, strip)
    assert n == tap.content_events == len(TRICKY)
    assert (tap.prompt_tokens, tap.completion_tokens) == (12, 5)
    assert tap.done and not tap.stream_error and not tap.bad_stream
    assert out == (STREAM.replace(USAGE, b"") if strip else STREAM)  # bytes through unchanged
    assert len(tap.gaps) == len(TRICKY) - 1


def test_pass_through_forwards_each_read_at_once() -> None:
    tap = StreamTap("chat", sse=True)
    half = STREAM[:37]
    assert tap.feed(half) == (half, 0)  # an incomplete event still goes out unchanged


def test_timeline_gaps() -> None:
    tap = StreamTap("chat", sse=True)
    tap.content_written(1.0, 1)
    tap.content_written(1.5, 2)  # two events in one read: the second gap is 0
    tap.content_written(1.75, 1)
    assert tap.first_content_at == 1.0 and tap.gaps == [0.5, 0.0, 0.25] and tap.content_events == 4


def test_completions_and_spaced_json() -> None:
    tap = StreamTap("completions", sse=True)
    data = b"".join(
        [
            _ev({"choices": [{"index": 0, "text": ""}]}, spaced=True),
            _ev({"choices": [{"index": 0, "text": "a"}]}, spaced=True),
            _ev({"choices": [{"index": 0, "text": "b"}]}),
            b"data: [DONE]\n\n",
        ]
    )
    assert tap.feed(data)[1] == 2 and tap.done


def test_truncated_and_error_streams() -> None:
    tap = StreamTap("chat", sse=True)
    tap.feed(_ev(_chat("a")))
    assert not tap.done  # no [DONE]: the proxy calls it truncated
    tap.feed(_ev({"error": {"message": "boom", "code": 500}}))
    assert tap.stream_error


def test_crlf_event_boundaries() -> None:
    tap = StreamTap("chat", sse=True, strip_usage=True)
    first = b'data: {"choices":[{"delta":{"content":"a"}}]}\r\n\r\n'
    out, n = tap.feed(first + b"data: {")
    assert (out, n) == (first, 1)


def test_json_body_usage_split_across_reads() -> None:
    body = json.dumps(
        {
            "choices": [{"message": {"content": "x" * 3000}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        }
    ).encode()
    tap = StreamTap("chat", sse=False)
    cut = body.index(b'"completion_tokens"') + 5
    assert tap.feed(body[:cut]) == (body[:cut], 0)
    tap.feed(body[cut:])
    assert (tap.prompt_tokens, tap.completion_tokens) == (3, 2)


def test_a_frame_cut_short_marks_the_stream_bad_and_still_passes_through() -> None:
    broken = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"\n\n'  # the sim's malformed frame
    stream = _ev(_chat("a")) + broken + _ev(_chat("b")) + b"data: [DONE]\n\n"
    tap, out, _ = _run(stream, [len(_ev(_chat("a"))) + 7], strip=False)
    assert tap.bad_stream and tap.done and out == stream


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=12))
def test_comments_blank_lines_and_crlf_are_not_bad(cuts: list[int]) -> None:
    done = b"data: [DONE]\n\n"
    crlf = _ev(_chat("c")).replace(b"\n", b"\r\n")
    stream = b": keep-alive\n\n" + STREAM.removesuffix(done) + crlf + b"\n\n" + done
    tap, out, _ = _run(stream, [c for c in cuts if c < len(stream)], strip=False)
    assert not tap.bad_stream and tap.done and out == stream
