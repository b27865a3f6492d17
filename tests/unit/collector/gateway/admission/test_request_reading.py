"""Classes, routes and the max_tokens cap read a body as vLLM's request models read it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.degrade_state.state import cap_max_tokens
from lanewatch.collector.gateway.admission.classify import Classifier, classify_request
from lanewatch.collector.gateway.admission.routing import RouteTable, choose_lane, route_input
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.openai_api.request_reading import ReadingError, read_max_tokens, read_prompt

LANES = {"fast": {"upstreams": ["http://127.0.0.1:9"]}, "slow": {"upstreams": ["http://127.0.0.1:9"]}}


def classifier(**cfg: Any) -> Classifier:
    return Classifier.from_config(GatewayConfig.model_validate({"lanes": LANES, **cfg}), None)


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}


@pytest.mark.parametrize(
    "fields",
    [
        {"max_tokens": "4096"},
        {"max_tokens": 4096.0},
        {"max_tokens": " 4_096 "},
        {"max_tokens": "4096.0"},
        {"max_tokens": 4096, "max_completion_tokens": None},
        {"max_completion_tokens": "4096", "max_tokens": 1},
        {},  # no bound: up to the context length
    ],
)
def test_lax_and_missing_max_tokens_do_not_pass_as_interactive(fields: dict[str, Any]) -> None:
    assert classify_request(classifier(), {}, None, chat(**fields), "chat")[0] == "batch"


def test_chat_reads_max_completion_tokens_first_and_completions_only_max_tokens() -> None:
    assert read_max_tokens({"max_tokens": 900, "max_completion_tokens": 5}, "chat") == 5
    assert read_max_tokens({"max_tokens": 900, "max_completion_tokens": None}, "chat") == 900
    assert read_max_tokens({"max_tokens": True}, "chat") == 1
    assert read_max_tokens({}, "chat") is None
    # vLLM's CompletionRequest has no max_completion_tokens, and max_tokens defaults to 16
    assert read_max_tokens({"max_completion_tokens": "x"}, "completions") == 16
    assert read_max_tokens({"max_tokens": None}, "completions") == 16


@pytest.mark.parametrize("value", ["abc", "1e3", 12.5, "12.5", [1], {"a": 1}, "", 1e20])
def test_a_count_vllm_refuses_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(ReadingError) as err:
        classify_request(classifier(), {}, None, chat(max_completion_tokens=value), "chat")
    assert err.value.field == "max_completion_tokens"


def test_token_id_prompts_count_chars_per_token() -> None:
    body = {"model": "m", "prompt": list(range(40_000)), "max_tokens": 8}
    cls, req = classify_request(classifier(), {}, None, body, "completions")
    assert cls == "batch" and req.prompt_chars == 160_000
    nested = {"prompt": [[1, 2], [3.0]], "max_tokens": 8}
    assert read_prompt(nested, "completions").tokens == 3
    assert read_prompt({"prompt": [1, "2"]}, "completions").tokens == 2  # lax ints, as vLLM
    assert read_prompt({"prompt": ["ab", "c"]}, "completions").chars == 3
    with pytest.raises(ReadingError):
        read_prompt({"prompt": [-1]}, "completions")


def test_missing_max_tokens_is_configurable_and_validated() -> None:
    c = classifier(reading={"missing_max_tokens": 100})
    assert classify_request(c, {}, None, chat(), "chat")[0] == "interactive"
    with pytest.raises(ValidationError) as err:
        LanewatchConfig.model_validate({"gateway": {"reading": {"missing_max_tokens": 0}}})
    assert "gateway.reading.missing_max_tokens" in str(err.value).replace("\n", " ").replace(" ", ".") or (
        "missing_max_tokens" in str(err.value)
    )


def test_routes_read_the_same_bound() -> None:
    cfg = GatewayConfig.model_validate(
        {"lanes": LANES, "rules": {"max_tokens": [{"lane": "slow", "min": 1024}]}}
    )
    table = RouteTable.from_config(cfg)
    assert choose_lane(table, route_input(chat(max_tokens="2048"), None, "chat")).lane == "slow"


@pytest.mark.parametrize(
    ("api", "body", "after"),
    [
        ("chat", {"max_tokens": "100"}, {"max_tokens": "100"}),  # vLLM reads 100: not raised to 256
        ("chat", {"max_tokens": "4096"}, {"max_tokens": 256}),
        ("chat", {"max_tokens": 4096.0}, {"max_tokens": 256}),
        (
            "chat",
            {"max_completion_tokens": "900", "max_tokens": 10},
            {"max_completion_tokens": 256, "max_tokens": 10},
        ),
        (
            "chat",
            {"max_completion_tokens": 10, "max_tokens": 900},
            {"max_completion_tokens": 10, "max_tokens": 256},
        ),
        (
            "chat",
            {"max_completion_tokens": None, "max_tokens": 900},
            {"max_completion_tokens": None, "max_tokens": 256},
        ),
        ("chat", {}, {"max_tokens": 256}),
        ("completions", {}, {}),  # vLLM's default 16 is under the cap: not raised
        ("completions", {"max_tokens": None}, {"max_tokens": None}),
        ("completions", {"max_tokens": "900"}, {"max_tokens": 256}),
    ],
)
def test_the_cap_clamps_what_vllm_reads(api: Any, body: dict[str, Any], after: dict[str, Any]) -> None:
    cap_max_tokens(body, 256, api)
    assert body == after
    assert (read_max_tokens(body, api) or 0) <= 256


@pytest.mark.parametrize("peer", ["::ffff:10.1.2.3", "10.1.2.3"])
def test_an_ipv4_mapped_peer_is_in_its_ipv4_network(peer: str) -> None:
    c = classifier(hints={"trusted_networks": ["10.0.0.0/8"]})
    assert c.trusted(peer, None)
    assert not c.trusted("::ffff:11.1.2.3", None)


def test_a_pattern_re2_cannot_compile_is_refused_naming_the_field() -> None:
    rules = {"message_regex": [{"pattern": r"(a)\1", "lane": "slow"}]}
    with pytest.raises(ValidationError) as err:
        LanewatchConfig.model_validate({"gateway": {"lanes": LANES, "rules": rules}})
    assert "message_regex.0.pattern" in str(err.value) and "RE2" in str(err.value)


def test_the_regex_sees_a_bounded_prefix() -> None:
    rules = {"message_regex": [{"pattern": "needle", "lane": "fast"}]}
    cfg = GatewayConfig.model_validate({"lanes": LANES, "rules": rules, "reading": {"regex_max_chars": 100}})
    table = RouteTable.from_config(cfg)
    near = chat(messages=[{"role": "user", "content": "needle" + "x" * 200}])
    far = chat(messages=[{"role": "user", "content": "x" * 200 + "needle"}])
    assert choose_lane(table, route_input(near, None, "chat", cfg.reading)).lane == "fast"
    assert choose_lane(table, route_input(far, None, "chat", cfg.reading)).lane == "slow"
