"""The documented tokenizer rule and the deterministic output."""

from __future__ import annotations

from lanewatch.simulator import tokens


def test_text_tokens_are_words_and_punctuation() -> None:
    assert tokens.count_text_tokens("Hello, world!") == 4
    assert tokens.count_text_tokens("") == 0
    assert tokens.count_text_tokens("  a  b\n c ") == 3


def test_chat_prompt_rule() -> None:
    ids = tokens.chat_prompt_ids([("system", "Be brief."), ("user", "Hello, world!")])
    assert len(ids) == 1 + (4 + 3) + (4 + 4) + 3


def test_completion_prompt_rule() -> None:
    assert len(tokens.completion_prompt_ids("one two three")) == 4
    assert tokens.completion_prompt_ids([5, 6, 7]) == [5, 6, 7]


def test_content_parts_count_their_text() -> None:
    parts = [{"type": "text", "text": "a b"}, {"type": "image_url", "image_url": {"url": "x"}}]
    assert tokens.message_text(parts) == "a b"


def test_output_plan_is_exact() -> None:
    d = tokens.text_digest("prompt", 0)
    natural = tokens.natural_length(d)
    assert 16 <= natural <= 512
    assert tokens.plan_output(7, True, d) == tokens.OutputPlan(7, "length")
    assert tokens.plan_output(natural + 5, False, d) == tokens.OutputPlan(natural, "stop")
    assert tokens.plan_output(natural, False, d) == tokens.OutputPlan(natural, "length")


def test_output_is_seeded_and_deterministic() -> None:
    a = tokens.text_digest("same prompt", 1)
    assert a == tokens.text_digest("same prompt", 1)
    assert a != tokens.text_digest("same prompt", 2)
    text = tokens.output_text(a, 20)
    assert tokens.count_text_tokens(text) == 20
    assert text == tokens.output_text(a, 20)
