"""The operator classes requests: rules over the request, client hints only from trusted clients."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from lanewatch.collector.gateway.admission.classify import ClassHintError, Classifier, classify_request
from lanewatch.collector.gateway.settings import GatewayConfig

LANES = {"fast": {"upstreams": ["http://127.0.0.1:9"]}, "slow": {"upstreams": ["http://127.0.0.1:9"]}}


def classifier(token: str | None = None, **cfg: Any) -> Classifier:
    return Classifier.from_config(GatewayConfig.model_validate({"lanes": LANES, **cfg}), token)


def chat(max_tokens: int | None = 16, content: str = "hi", model: str = "m") -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": content}]}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


def test_the_default_rules_class_long_answers_and_long_prompts_as_batch() -> None:
    c = classifier()
    assert classify_request(c, {}, "10.0.0.1", chat(16), "chat")[0] == "interactive"
    # no max_tokens: vLLM runs it up to the context length (reading.missing_max_tokens)
    assert classify_request(c, {}, "10.0.0.1", chat(None), "chat")[0] == "batch"
    assert classify_request(c, {}, "10.0.0.1", chat(1024), "chat")[0] == "batch"
    assert classify_request(c, {}, "10.0.0.1", chat(16, "x" * 32_000), "chat")[0] == "batch"


def test_an_untrusted_client_cannot_choose_its_class_or_lane() -> None:
    c = classifier()
    headers = {"x-lanewatch-class": "interactive", "x-lanewatch-lane": "fast"}
    cls, req = classify_request(c, headers, "127.0.0.1", chat(4096), "chat")
    assert cls == "batch" and req.header_lane is None
    # not even a malformed hint is read: it is no 400, just ignored
    assert classify_request(c, {"x-lanewatch-class": "no way"}, None, chat(), "chat")[0] == "interactive"


def test_a_trusted_network_or_the_hint_token_may_hint_within_the_closed_set() -> None:
    c = classifier("tok", hints={"trusted_networks": ["10.1.0.0/16", "::1/128"]})
    hinted = {"x-lanewatch-class": "batch", "x-lanewatch-lane": "fast"}
    cls, req = classify_request(c, hinted, "10.1.2.3", chat(), "chat")
    assert (cls, req.header_lane) == ("batch", "fast")
    assert classify_request(c, hinted, "::1", chat(), "chat")[0] == "batch"
    assert classify_request(c, hinted, "10.2.0.1", chat(), "chat")[0] == "interactive"
    assert (
        classify_request(c, {**hinted, "authorization": "Bearer tok"}, "10.2.0.1", chat(), "chat")[0]
        == "batch"
    )
    assert (
        classify_request(c, {**hinted, "authorization": "Bearer nope"}, None, chat(), "chat")[0]
        == "interactive"
    )
    assert classify_request(c, {"x-lanewatch-class": "sq42"}, "10.1.0.9", chat(), "chat")[0] == "other"
    with pytest.raises(ClassHintError):
        classify_request(c, {"x-lanewatch-class": "no way"}, "10.1.0.9", chat(), "chat")


def test_operator_rules_match_on_model_route_size_and_max_tokens_first_match_wins() -> None:
    rules = [
        {"name": "batch", "models": ["big"], "api": "completions"},
        {"name": "summary", "prompt_chars": {"min": 100}},
        {"name": "short", "max_tokens": {"max": 8}},
    ]
    c = classifier(classes=rules, hints={"classes": ["short"]})
    assert c.classes == frozenset({"interactive", "batch", "summary", "short"})
    assert c.by_rules(classify_request(c, {}, None, chat(model="big"), "chat")[1], "completions") == "batch"
    assert classify_request(c, {}, None, chat(model="big"), "chat")[0] == "interactive"
    assert classify_request(c, {}, None, chat(4, "y" * 100), "chat")[0] == "summary"
    assert classify_request(c, {}, None, chat(4), "chat")[0] == "short"


def test_bad_classification_config_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="needs models, api, max_tokens or prompt_chars"):
        GatewayConfig.model_validate({"classes": [{"name": "batch"}]})
    with pytest.raises(ValidationError, match=r"bad network '10\.0\.0\.300/8'"):
        GatewayConfig.model_validate({"hints": {"trusted_networks": ["10.0.0.300/8"]}})
