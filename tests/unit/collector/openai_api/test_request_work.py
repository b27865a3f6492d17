"""A request's work as vLLM reads it: the bound x `n` (or `best_of` when larger) x its prompts; and
a cap that bounds that work, not max_tokens alone."""

from __future__ import annotations

from typing import Any

import pytest

from lanewatch.collector.classify.rules import DEFAULT_CLASS_RULES, ReadingConfig, class_of, measure
from lanewatch.collector.degrade_state.state import WorkOverCap, cap_max_tokens
from lanewatch.collector.openai_api.request_reading import (
    ReadingError,
    read_prompt,
    read_sequences,
    read_work,
    work_units,
)

MISSING = 1_000_000


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}


def done(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "prompt": "hi", **fields}


@pytest.mark.parametrize(
    ("body", "api", "work"),
    [
        (chat(max_tokens=1000), "chat", 1000),
        (chat(max_tokens=1000, n=16), "chat", 16_000),
        (chat(max_tokens=64, n="16"), "chat", 1024),  # vLLM's lax int: "16" is 16
        (chat(max_tokens=10, n=2.0), "chat", 20),
        (chat(max_tokens=10, n=None), "chat", 10),  # chat's n: null is 1
        (chat(max_completion_tokens=10, max_tokens=99, n=3), "chat", 30),
        (chat(n=2), "chat", 2 * MISSING),  # no bound: up to the context length, per sequence
        (done(max_tokens=1000, best_of=20), "completions", 20_000),
        (done(max_tokens=10, n=4, best_of=2), "completions", 40),  # best_of counts only when larger
        (done(max_tokens=1000, prompt=["a"] * 50), "completions", 50_000),
        (done(max_tokens=10, prompt=[[1, 2], [3], [4]]), "completions", 30),  # three token-id prompts
        (done(max_tokens=10, prompt=[1, 2, 3]), "completions", 10),  # one token-id prompt
        (done(prompt=["a", "b"], n=3), "completions", 2 * 3 * 16),  # vLLM's default 16 each
        (done(max_tokens=10, prompt=None, prompt_embeds=["e1", "e2"]), "completions", 20),
        (done(max_tokens=10, prompt=["a", "b"], prompt_embeds="e"), "completions", 30),  # both run
        (done(max_tokens=10, prompt=[]), "completions", 10),  # no prompt vLLM runs: counted as one
        (chat(max_tokens=10, prompt=["a"] * 9), "chat", 10),  # chat has one conversation
    ],
)
def test_the_work_is_bound_times_sequences_times_prompts(body: dict[str, Any], api: Any, work: int) -> None:
    assert read_work(body, api, MISSING).total == work


@pytest.mark.parametrize(
    ("body", "api", "field"),
    [
        (chat(n=0), "chat", "n"),
        (chat(n=-3), "chat", "n"),
        (chat(n=True), "chat", "n"),  # a flag is no count, though pydantic reads it as 1
        (chat(n=2.5), "chat", "n"),
        (chat(n="2.5"), "chat", "n"),
        (chat(n=[16]), "chat", "n"),
        (chat(n={"n": 16}), "chat", "n"),
        (done(n=None), "completions", "n"),  # CompletionRequest.n is `int`: null is refused
        (done(best_of=0), "completions", "best_of"),
        (done(best_of=False), "completions", "best_of"),
        (done(best_of="x"), "completions", "best_of"),
    ],
)
def test_a_count_vllm_refuses_or_no_count_is_refused_naming_its_field(
    body: dict[str, Any], api: Any, field: str
) -> None:
    with pytest.raises(ReadingError) as info:
        read_sequences(body, api)
    assert info.value.field == field


def test_prompt_embeds_must_be_text_and_each_entry_is_a_prompt() -> None:
    assert read_prompt(done(prompt=None, prompt_embeds=["a", "b", "c"]), "completions").count == 3
    with pytest.raises(ReadingError) as info:
        read_prompt(done(prompt_embeds=[1]), "completions")
    assert info.value.field == "prompt_embeds"


def test_a_batch_rule_over_max_tokens_holds_the_work() -> None:
    reading = ReadingConfig()

    def cls(body: dict[str, Any], api: Any) -> str:
        m = measure(body, api, reading)
        return class_of(DEFAULT_CLASS_RULES, "interactive", api, m.model, m.work, m.prompt_chars)

    assert cls(chat(max_tokens=1000), "chat") == "interactive"
    assert cls(chat(max_tokens=1000, n=16), "chat") == "batch"
    assert cls(done(max_tokens=1000, prompt=["p"] * 50), "completions") == "batch"
    assert cls(done(max_tokens=1000, best_of=20), "completions") == "batch"
    assert cls(done(max_tokens=100, prompt=["p"] * 10), "completions") == "interactive"  # 1000


@pytest.mark.parametrize(
    ("body", "api", "cap", "bound"),
    [
        (chat(max_tokens=64, n=64), "chat", 64, 1),  # 4,096 asked; 64 x 1 served
        (chat(max_tokens=100, n=4), "chat", 64, 16),
        (chat(n=3), "chat", 64, 21),  # no bound: floor(64 / 3) set
        (chat(max_completion_tokens=100, max_tokens=50, n=2), "chat", 64, 32),
        (done(prompt=["a"] * 8), "completions", 64, 8),  # the default 16 each: 128 > 64
        (done(max_tokens=100, n=2, best_of=4), "completions", 64, 16),
        (done(max_tokens=10, prompt=["a"] * 6), "completions", 64, 10),  # 60: under the cap
    ],
)
def test_a_cap_bounds_the_work(body: dict[str, Any], api: Any, cap: int, bound: int) -> None:
    before = read_work(body, api, MISSING).total
    changed = cap_max_tokens(body, cap, api)
    after = read_work(body, api, MISSING).total
    assert after <= cap
    assert after == bound * work_units(body, api)
    assert changed == (after != before)


def test_a_cap_refuses_a_work_no_max_tokens_brings_under_it() -> None:
    body = chat(max_tokens=1, n=65)
    with pytest.raises(WorkOverCap) as info:
        cap_max_tokens(body, 64, "chat")
    assert (info.value.cap, info.value.units) == (64, 65)
    assert body == chat(max_tokens=1, n=65)  # left as it came
    assert cap_max_tokens(chat(max_tokens=1, n=64), 64, "chat") is False  # exactly the cap: served
