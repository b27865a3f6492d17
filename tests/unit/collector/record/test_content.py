from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lanewatch.collector.record.content import (
    MAX_CONTENT_BYTES,
    TRUNCATED_MARKER,
    StreamedText,
    input_messages,
    output_messages,
    prompt_text,
    request_messages,
    truncate,
)

MARKER = len(TRUNCATED_MARKER.encode())


def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


# ---------------------------------------------------------------- truncate


@pytest.mark.parametrize("text", ["", "short", "x" * MAX_CONTENT_BYTES, "é" * (MAX_CONTENT_BYTES // 2)])
def test_text_that_fits_is_kept_whole(text: str) -> None:
    assert truncate(text) == text


@pytest.mark.parametrize("text", ["x" * (MAX_CONTENT_BYTES + 1), "é" * MAX_CONTENT_BYTES, "😀" * 5000])
def test_longer_text_is_cut_to_the_bound_with_the_marker(text: str) -> None:
    out = truncate(text)
    assert out.endswith(TRUNCATED_MARKER)
    assert _utf8(out) <= MAX_CONTENT_BYTES
    assert _utf8(out) > MAX_CONTENT_BYTES - MARKER - 4  # a character is at most 4 bytes
    assert text.startswith(out.removesuffix(TRUNCATED_MARKER))  # never a broken character


def test_a_lone_surrogate_becomes_encodable() -> None:
    out = truncate("a\ud800b")
    assert out == "a?b"
    out.encode("utf-8")  # would raise for the surrogate itself


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=["Cs"])), st.integers(min_value=MARKER, max_value=64))
def test_truncate_keeps_a_prefix_within_the_limit(text: str, limit: int) -> None:
    out = truncate(text, limit)
    assert _utf8(out) <= limit
    if _utf8(text) <= limit:
        assert out == text
    else:
        assert out.endswith(TRUNCATED_MARKER) and text.startswith(out.removesuffix(TRUNCATED_MARKER))


# ---------------------------------------------------------------- the prompt


def test_chat_messages_in_order_with_text_parts_only() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Look: "}, {"type": "image_url"}]},
            {"content": "no role"},
            "not a message",
            {"role": "assistant", "content": None},
        ]
    }
    messages = request_messages(body, "chat")
    assert messages == [("system", "Be brief."), ("user", "Look: "), ("user", "no role"), ("assistant", "")]
    assert prompt_text(messages) == "Be brief.\nLook: \nno role\n"


def test_completions_prompt_string_or_list_of_strings() -> None:
    assert request_messages({"prompt": "Once upon"}, "completions") == [("user", "Once upon")]
    assert request_messages({"prompt": ["a", [1, 2], "b"]}, "completions") == [("user", "a"), ("user", "b")]
    assert request_messages({"prompt": [1, 2, 3]}, "completions") == []
    assert request_messages({}, "chat") == []


def test_prompt_text_is_truncated() -> None:
    text = prompt_text([("system", "s" * MAX_CONTENT_BYTES), ("user", "u")])
    assert text.endswith(TRUNCATED_MARKER) and _utf8(text) <= MAX_CONTENT_BYTES


def test_input_messages_follow_the_genai_schema() -> None:
    value = json.loads(input_messages([("system", "Be brief."), ("user", "Weather in Paris?")]))
    assert value == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
    ]


def test_input_messages_share_one_budget_and_mark_the_cut() -> None:
    messages = [("user", "a" * 600), ("assistant", "b" * 600), ("user", "c" * 600)]
    value = json.loads(input_messages(messages, limit=1000))
    texts = [m["parts"][0]["content"] for m in value]
    assert [m["role"] for m in value] == ["user", "assistant"]  # the rest is left out after the mark
    assert texts[0] == "a" * 600 and texts[1].endswith(TRUNCATED_MARKER)
    assert sum(_utf8(t) for t in texts) <= 1000


def test_output_messages_follow_the_genai_schema() -> None:
    assert json.loads(output_messages("It rains.", "stop")) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "It rains."}], "finish_reason": "stop"}
    ]
    assert json.loads(output_messages("", None))[0]["finish_reason"] == "error"  # required by the schema


# ---------------------------------------------------------------- streamed text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(exclude_categories=["Cs"]), max_size=3000), max_size=30))
def test_streamed_text_is_the_truncated_concatenation(chunks: list[str]) -> None:
    text = StreamedText()
    for chunk in chunks:
        text.add(chunk)
    assert text.text() == truncate("".join(chunks))


def test_streamed_text_stops_holding_once_past_the_bound() -> None:
    text = StreamedText()
    for _ in range(10_000):
        text.add("x" * 100)
    assert sum(len(p) for p in text._parts) <= MAX_CONTENT_BYTES + 100
    assert text.text().endswith(TRUNCATED_MARKER)
