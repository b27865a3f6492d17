"""The shared class rules: the first matching rule names the class, else the default; vLLM's measures."""

from __future__ import annotations

from lanewatch.collector.classify.rules import (
    DEFAULT_CLASS_RULES,
    ReadingConfig,
    class_of,
    measure,
    parse_class_rules,
)


def test_the_first_rule_matching_every_criterion_wins_else_the_default() -> None:
    rules = parse_class_rules(
        [
            {"name": "a", "models": ["m"], "max_tokens": {"max": 10}},
            {"name": "b", "models": ["m"]},
            {"name": "c", "api": "completions", "prompt_chars": {"min": 5, "max": 9}},
        ]
    )
    assert class_of(rules, "z", "chat", "m", 10, 0) == "a"
    assert class_of(rules, "z", "chat", "m", 11, 0) == "b"  # a's bound fails; b's model alone holds
    assert class_of(rules, "z", "completions", "n", 11, 9) == "c"
    assert class_of(rules, "z", "chat", "n", 11, 9) == "z"  # c is completions only
    assert class_of(rules, "z", "completions", None, None, None) == "z"  # an unknown measure is in no range


def test_measures_count_a_missing_chat_bound_and_token_ids_as_the_reading_says() -> None:
    reading = ReadingConfig(missing_max_tokens=500, chars_per_token=3)
    m = measure({"model": "m", "messages": [{"role": "user", "content": "hello"}]}, "chat", reading)
    assert (m.model, m.work, m.prompt_chars) == ("m", 500, 5)
    m = measure({"model": 7, "prompt": [1, 2]}, "completions", reading)
    assert (m.model, m.work, m.prompt_chars) == (None, 16, 6)  # vLLM's completions default
    assert class_of(DEFAULT_CLASS_RULES, "interactive", "chat", None, 1024, 0) == "batch"
    assert class_of(DEFAULT_CLASS_RULES, "interactive", "chat", None, 1023, 31_999) == "interactive"
