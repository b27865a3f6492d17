from __future__ import annotations

from typing import Any

import pytest

from lanewatch.collector.gateway.admission.routing import (
    RouteError,
    RouteInput,
    RouteTable,
    choose_lane,
    route_input,
)
from lanewatch.collector.gateway.settings import GatewayConfig

CFG = GatewayConfig.model_validate(
    {
        "lanes": {
            "fast": {"upstreams": ["http://f"]},
            "mid": {"upstreams": ["http://m"]},
            "slow": {"upstreams": ["http://s"]},
        },
        "rules": {
            "models": {"tiny": "fast", "huge": "slow"},
            "message_regex": [
                {"pattern": "(?i)summari[sz]e", "lane": "slow"},
                {"pattern": "^hi\\b", "lane": "fast"},
            ],
            "prompt_chars": [{"max": 20, "lane": "fast"}, {"min": 5000, "lane": "slow"}],
            "max_tokens": [{"max": 32, "lane": "fast"}, {"min": 33, "max": 512, "lane": "mid"}],
        },
    }
)
TABLE = RouteTable.from_config(CFG)


@pytest.mark.parametrize(
    ("req", "lane", "rule"),
    [
        (RouteInput(prompt_chars=100), "slow", "default"),  # default lane: the slowest (last listed)
        (RouteInput(header_lane="mid", model="tiny"), "mid", "header"),  # header beats everything
        (RouteInput(model="tiny", last_user_message="please summarize", prompt_chars=9000), "fast", "model"),
        (
            RouteInput(model="other", last_user_message="Summarise this", prompt_chars=10),
            "slow",
            "message_regex",
        ),
        (
            RouteInput(last_user_message="hi there", prompt_chars=9000),
            "fast",
            "message_regex",
        ),  # first regex wins
        (RouteInput(last_user_message="say hi", prompt_chars=10, work=1000), "fast", "prompt_chars"),
        (RouteInput(prompt_chars=20), "fast", "prompt_chars"),  # bounds are inclusive
        (RouteInput(prompt_chars=21, work=32), "fast", "max_tokens"),
        (
            RouteInput(prompt_chars=5000, work=8),
            "slow",
            "prompt_chars",
        ),  # prompt length before max_tokens
        (RouteInput(prompt_chars=100, work=33), "mid", "max_tokens"),
        (RouteInput(prompt_chars=100, work=513), "slow", "default"),
        (
            RouteInput(prompt_chars=100, work=None),
            "slow",
            "default",
        ),  # no max_tokens: no max_tokens rule
    ],
)
def test_rules_in_order(req: RouteInput, lane: str, rule: str) -> None:
    routed = choose_lane(TABLE, req)
    assert (routed.lane, routed.rule) == (lane, rule)


def test_unknown_header_lane_is_an_error() -> None:
    with pytest.raises(RouteError, match="unknown lane 'turbo'"):
        choose_lane(TABLE, RouteInput(header_lane="turbo"))


def test_explicit_default_lane() -> None:
    cfg = CFG.model_copy(update={"default_lane": "mid"})
    assert choose_lane(RouteTable.from_config(cfg), RouteInput(prompt_chars=100)).lane == "mid"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {
                "model": "m",
                "max_tokens": 9,
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "ok"},
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "last "}, {"type": "text", "text": "one"}],
                    },
                ],
            },
            RouteInput(model="m", last_user_message="last one", prompt_chars=8 + 5 + 2 + 8, work=9),
        ),
        (
            {"model": "m", "max_tokens": 9, "max_completion_tokens": 4, "messages": []},
            RouteInput(model="m", last_user_message=None, prompt_chars=0, work=4),
        ),
        # vLLM reads true as 1, and a completions request without max_tokens as 16
        (
            {"prompt": "abc", "max_tokens": True},
            RouteInput(last_user_message="abc", prompt_chars=3, work=1),
        ),
        # two prompts, each to 16 tokens: the work is 32
        (
            {"prompt": ["ab", "cde"]},
            RouteInput(last_user_message="cde", prompt_chars=5, work=32, work_units=2),
        ),
        # token ids: no text, each counts reading.chars_per_token (4) chars
        ({"prompt": [1, 2, 3], "model": 7}, RouteInput(prompt_chars=12, work=16)),
    ],
)
def test_route_input_from_body(body: dict[str, Any], expected: RouteInput) -> None:
    assert route_input(body, None, "chat" if "messages" in body else "completions") == expected


def test_config_rejects_rules_naming_unknown_lanes() -> None:
    with pytest.raises(ValueError, match="unknown lanes"):
        GatewayConfig.model_validate(
            {"lanes": {"fast": {"upstreams": ["http://f"]}}, "rules": {"models": {"m": "slow"}}}
        )


@pytest.mark.parametrize(
    ("rules", "reason"),
    [
        ({"message_regex": [{"pattern": "(", "lane": "fast"}]}, "RE2 cannot compile"),
        ({"prompt_chars": [{"lane": "fast"}]}, "give min, max or both"),
        ({"max_tokens": [{"min": 10, "max": 5, "lane": "fast"}]}, "min 10 > max 5"),
    ],
)
def test_config_rejects_bad_rules(rules: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        GatewayConfig.model_validate({"lanes": {"fast": {"upstreams": ["http://f"]}}, "rules": rules})
