"""The LiteLLM handler classes a request by the operator's rules over its body, as the gateway does;
the client's class header counts only when the settings trust it."""

from __future__ import annotations

from typing import Any

import pytest

from lanewatch.collector.degrade_state.state import DegradeState, Shifter, parse_degrade
from lanewatch.integrations.litellm.classing import request_class
from lanewatch.integrations.litellm.degrade import plan
from lanewatch.integrations.litellm.settings import HandlerSettings, settings_from

ORDER = ("fast", "slow")
SHED_BATCH = DegradeState(parse_degrade({"lanes": {"slow": {"shed_classes": ["batch"]}}}, ORDER))


def chat(max_tokens: int | None = 64, text: str = "hello") -> dict[str, Any]:
    body: dict[str, Any] = {"model": "slow-group", "messages": [{"role": "user", "content": text}]}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


def shed(settings: HandlerSettings, body: dict[str, Any], headers: dict[str, str] | None = None) -> bool:
    """Whether the slow lane, shedding batch, sheds this chat request."""
    cls = request_class(settings, body, headers, "chat")
    return plan(SHED_BATCH, body, "slow", cls, {}, Shifter(), "chat").decision.shed


def test_a_batch_sized_request_without_a_header_is_shed_and_a_small_one_is_served() -> None:
    s = HandlerSettings()
    assert request_class(s, chat(2048), None, "chat") == "batch"  # the default rules: max_tokens >= 1024
    assert request_class(s, chat(64, "x" * 32_000), None, "chat") == "batch"  # or a prompt of 32000 chars
    assert request_class(s, chat(None), None, "chat") == "batch"  # no bound: up to the context
    assert request_class(s, chat(64), None, "chat") == "interactive"
    assert shed(s, chat(2048)) and not shed(s, chat(64))


def test_a_header_claiming_interactive_escapes_the_shed_only_when_trusted() -> None:
    claim = {"X-Lanewatch-Class": "interactive"}
    assert shed(HandlerSettings(), chat(2048), claim)
    trusted = HandlerSettings(trust_class_header=True)
    assert not shed(trusted, chat(2048), claim)
    assert request_class(trusted, chat(64), {"x-lanewatch-class": " Batch "}, "chat") == "batch"
    assert request_class(trusted, chat(2048), {"x-other": "interactive"}, "chat") == "batch"  # no hint: rules


def test_the_rules_read_like_the_gateways_model_api_and_the_reading_settings() -> None:
    s = settings_from(
        {
            "classes": [
                {"name": "tagged", "models": ["slow-group"], "api": "completions"},
                {"name": "long", "max_tokens": {"min": 100, "max": 200}},
                {"name": "huge", "prompt_chars": {"min": 40}},
            ],
            "default_class": "short",
            "reading": {"missing_max_tokens": 150, "chars_per_token": 10},
        }
    )
    completion = {"model": "slow-group", "prompt": "hi"}  # completions: no max_tokens is vLLM's 16
    assert request_class(s, completion, None, "completions") == "tagged"
    assert request_class(s, chat(64), None, "chat") == "short"  # the model, but not the api
    assert request_class(s, chat(None), None, "chat") == "long"  # a missing bound counts 150
    token_ids = {"model": "m", "prompt": [1, 2, 3, 4]}  # 4 ids x 10 chars
    assert request_class(s, token_ids, None, "completions") == "huge"
    assert request_class(s, chat(-1), None, "chat") == "short"  # a bound vLLM refuses: the default class


def test_bad_class_settings_are_refused_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="needs models, api, max_tokens or prompt_chars"):
        settings_from({"classes": [{"name": "batch"}]})
    with pytest.raises(ValueError, match="min 9 > max 1"):
        settings_from({"classes": [{"name": "batch", "max_tokens": {"min": 9, "max": 1}}]})
    with pytest.raises(ValueError, match="bad class name"):
        settings_from({"default_class": "Not A Class"})
    with pytest.raises(ValueError, match="chars_per_token"):
        settings_from({"reading": {"chars_per_token": 0}})
    with pytest.raises(ValueError, match="trust_class_header"):
        settings_from({"trust_class_header": "yes"})
