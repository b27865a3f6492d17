"""One usage parser: the prober's decoded chunks and the tap's raw bytes read the same counts."""

from __future__ import annotations

import json

import pytest

from lanewatch.collector.gateway.tap.stream_scan import StreamTap
from lanewatch.collector.http1.sse import SseParser
from lanewatch.collector.openai_api.usage import USAGE_PATHS, Usage, parse_usage, usage_fields, usage_in
from lanewatch.collector.record.timing import RequestTiming

# vLLM 0.x with --enable-prompt-tokens-details, a request that hit the prefix cache
VLLM_USAGE = {
    "prompt_tokens": 1200,
    "total_tokens": 1456,
    "completion_tokens": 256,
    "prompt_tokens_details": {"cached_tokens": 1024},
}
CASES = [
    (VLLM_USAGE, Usage(1200, 256, 1024)),
    ({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}, Usage(7, 3, None)),  # no details
    ({"prompt_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": None}, Usage(7, 3, None)),
    ({"prompt_tokens": 7, "prompt_tokens_details": {"cached_tokens": "9"}}, Usage(7, None, None)),
    ({"prompt_tokens": True, "completion_tokens": -1}, Usage(None, None, None)),  # no count
]


def _events(usage: dict[str, object], spaced: bool) -> bytes:
    seps = (", ", ": ") if spaced else (",", ":")
    content = {"choices": [{"index": 0, "delta": {"content": "usage"}}]}
    last = {"choices": [], "usage": usage}
    return b"".join(b"data: " + json.dumps(o, separators=seps).encode() + b"\n\n" for o in (content, last))


@pytest.mark.parametrize(("usage", "want"), CASES)
@pytest.mark.parametrize("spaced", [False, True])
def test_the_prober_and_the_tap_read_the_same_counts(
    usage: dict[str, object], want: Usage, spaced: bool
) -> None:
    data = _events(usage, spaced) + b"data: [DONE]\n\n"
    chunks = SseParser().feed(data)
    assert [c.usage for c in chunks if c.usage is not None] == [want]
    tap = StreamTap("chat", sse=True)
    content = sum(tap.feed(data[i : i + 7])[1] for i in range(0, len(data), 7))  # split anywhere
    assert tap.usage == want
    assert (tap.prompt_tokens, tap.completion_tokens) == (want.prompt_tokens, want.completion_tokens)
    assert content == 1  # the delta `usage` is content, not a usage object


def test_the_last_usage_object_wins_with_usage_on_every_chunk() -> None:
    tap = StreamTap("chat", sse=True)
    for n in range(1, 4):
        usage = {"prompt_tokens": 5, "completion_tokens": n}
        tap.feed(
            f'data: {{"choices":[{{"delta":{{"content":"x"}}}}],"usage":{json.dumps(usage)}}}\n\n'.encode()
        )
    assert tap.usage == Usage(5, 3, None)


def test_a_json_body_split_inside_its_usage_object_is_read_whole() -> None:
    body = json.dumps({"choices": [{"message": {"content": "hi"}}], "usage": VLLM_USAGE}).encode()
    cut = body.index(b"cached_tokens")
    tap = StreamTap("chat", sse=False)
    tap.feed(body[:cut])
    tap.feed(body[cut:])
    assert tap.usage == Usage(1200, 256, 1024)


def test_bytes_without_a_usage_object_give_none() -> None:
    assert usage_in(b'data: {"choices":[],"usage":null}\n\n') is None
    assert usage_in(b'data: {"choices":[],"usage":{"prompt_tokens":5') is None  # cut short
    assert parse_usage(None) is None and parse_usage([1]) is None
    assert StreamTap("chat", sse=True).usage is None


def test_every_usage_field_but_completion_is_a_record_field_of_its_name() -> None:
    fields = usage_fields(Usage(1200, 256, 1024))
    assert fields == {"prompt_tokens": 1200, "cached_prompt_tokens": 1024}
    assert usage_fields(None) == {"prompt_tokens": None, "cached_prompt_tokens": None}
    assert set(USAGE_PATHS) == {f for f in Usage.__slots__}  # one path per field
    record = RequestTiming(source="tap", target="t", lane="l", request_class="c", model="m", **fields)
    assert (record.prompt_tokens, record.cached_prompt_tokens) == (1200, 1024)
