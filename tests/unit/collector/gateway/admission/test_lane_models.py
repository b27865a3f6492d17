"""Which model a lane is asked for, the unknown-model check, and the response header."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from lanewatch.collector.degrade_state.served_models import serve_as_declared
from lanewatch.collector.gateway.admission.lane_models import LaneModels, header_value, serve_as
from lanewatch.collector.gateway.admission.routing import RouteInput, RouteTable, choose_lane
from lanewatch.collector.gateway.settings import GatewayConfig


def _cfg(**lanes: dict[str, Any]) -> GatewayConfig:
    return GatewayConfig.model_validate(
        {"lanes": {k: {"upstreams": ["http://x"], **v} for k, v in lanes.items()}}
    )


CFG = _cfg(
    fast={"models": ["small", "small-instruct"], "model_map": {"huge": "small-instruct"}},
    mid={"models": ["medium"]},
    slow={"models": ["big", "huge"]},
)
MODELS = LaneModels.from_config(CFG)


@pytest.mark.parametrize(
    ("lane", "requested", "served"),
    [
        ("fast", "small", "small"),  # served as asked
        ("fast", "small-instruct", "small-instruct"),  # any of the lane's models, not only the first
        ("fast", "big", "small"),  # not served, not mapped: the lane's first model
        ("fast", "huge", "small-instruct"),  # the explicit map wins over the first model
        ("slow", "small", "big"),
        ("slow", "huge", "huge"),
        ("mid", "huge", "medium"),  # another lane's map does not apply here
    ],
)
def test_serve_as_rewrites_to_the_map_then_the_first_model(lane: str, requested: str, served: str) -> None:
    assert serve_as(MODELS, lane, requested) == served


def test_a_lane_without_declared_models_is_asked_as_the_client_asked() -> None:
    models = LaneModels.from_config(_cfg(fast={"models": ["small"]}, slow={}))
    assert serve_as(models, "slow", "small") == "small"
    assert serve_as(models, "fast", "anything") == "small"
    assert not models.complete  # so no request is refused as unknown


def test_known_models_are_served_or_mapped_by_some_lane() -> None:
    assert MODELS.complete
    assert all(MODELS.known(m) for m in ("small", "small-instruct", "medium", "big", "huge"))
    assert not MODELS.known("gpt-4") and not MODELS.known("")
    alias = LaneModels.from_config(_cfg(fast={"models": ["small"], "model_map": {"alias": "small"}}))
    assert alias.known("alias") and not alias.known("other")


def test_the_unknown_model_message_names_every_lanes_models() -> None:
    message = MODELS.unknown_model_message("gpt-4")
    assert message == (
        "The model `gpt-4` does not exist on this gateway. "
        "Lanes serve fast: small, small-instruct; mid: medium; slow: big, huge."
    )


def test_first_lane_serving_follows_lane_order() -> None:
    cfg = GatewayConfig.model_validate(
        {
            "lanes": {
                "slow": {"upstreams": ["http://s"], "models": ["m"]},
                "fast": {"upstreams": ["http://f"], "models": ["m"]},
            },
            "lane_order": ["fast", "slow"],
        }
    )
    assert LaneModels.from_config(cfg).first_lane_serving("m") == "fast"
    assert MODELS.first_lane_serving("huge") == "slow"  # mapped on fast, served on slow
    assert MODELS.first_lane_serving("nope") is None


@pytest.mark.parametrize(
    ("choice", "value"),
    [
        (("big", "small"), "big -> small"),
        (("a", "a"), "a -> a"),
        (("evil\r\nSet-Cookie: x=1", "small"), "evil??Set-Cookie: x=1 -> small"),
        (("modèle", "small"), "mod?le -> small"),
        (("x" * 500, "small"), "x" * 200 + " -> small"),
    ],
)
def test_header_value_is_one_safe_line(choice: tuple[str, str], value: str) -> None:
    assert header_value(*choice) == value


def test_a_request_for_a_model_the_default_lane_lacks_goes_where_it_is_served() -> None:
    table = RouteTable.from_config(CFG)  # default lane: slow
    assert (
        choose_lane(table, RouteInput(model="small")).lane,
        choose_lane(table, RouteInput(model="small")).rule,
    ) == (
        "fast",
        "served_model",
    )
    assert choose_lane(table, RouteInput(model="medium")).lane == "mid"
    assert choose_lane(table, RouteInput(model="big")).rule == "default"
    assert choose_lane(table, RouteInput(model="huge")).rule == "default"  # slow serves it; fast only maps it
    assert choose_lane(table, RouteInput(model="small", header_lane="slow")).lane == "slow"  # the header wins


def test_content_rules_win_over_the_served_model() -> None:
    cfg = CFG.model_copy(
        update={"rules": CFG.rules.model_validate({"max_tokens": [{"lane": "slow", "min": 1000}]})}
    )
    table = RouteTable.from_config(cfg)
    assert choose_lane(table, RouteInput(model="small", work=2000)).lane == "slow"


def test_no_served_model_routing_when_the_default_lane_declares_nothing() -> None:
    table = RouteTable.from_config(_cfg(fast={"models": ["small"]}, slow={}))
    assert choose_lane(table, RouteInput(model="small")).lane == "slow"


@pytest.mark.parametrize(
    ("lane", "message"),
    [
        ({"models": ["a", "a"]}, "duplicate model names: a"),
        ({"models": [" "]}, "model names must not be empty"),
        ({"model_map": {"x": "a"}}, "model_map needs models"),
        ({"models": ["a"], "model_map": {"x": "b"}}, "model_map: 'x' -> 'b', not one of models ['a']"),
        ({"models": ["a"], "model_map": {"a": "a"}}, "'a' is served by this lane itself"),
    ],
)
def test_bad_model_declarations_are_refused(lane: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("]", r"\]")) as info:
        _cfg(fast=lane)
    assert info.value.errors()[0]["loc"][:2] == ("lanes", "fast")


QUICK = _cfg(fast={}, slow={})  # the quick start: --upstream flags only, nothing declared


def test_learned_models_fill_in_a_lane_that_declared_none() -> None:
    models = LaneModels.from_config(QUICK, {"fast": ("small",), "slow": ("big",)})
    assert serve_as(models, "fast", "big") == "small"  # shifted to fast: asked for fast's model
    assert serve_as(models, "slow", "big") == "big"
    assert (models.source("fast"), models.knows("fast")) == ("learned", True)
    assert not models.complete  # a learned list never makes the unknown-model 404: it may be stale
    assert serve_as(models, "fast", "typo") == "typo"  # no lane lists it: passed on as named


def test_a_declaration_wins_over_what_the_upstreams_list() -> None:
    cfg = _cfg(fast={"models": ["declared"]}, slow={})
    models = LaneModels.from_config(cfg, {"fast": ("listed",), "slow": ()})
    assert models.served == {"fast": ("declared",)}
    assert (models.source("fast"), models.source("slow")) == ("declared", "unknown")
    assert not models.knows("slow") and serve_as(models, "slow", "x") == "x"


def test_learned_models_route_a_request_to_the_lane_serving_it() -> None:
    models = LaneModels.from_config(QUICK, {"fast": ("small",), "slow": ("big",)})
    assert models.served_elsewhere("slow") == {"small": "fast"}
    assert LaneModels.from_config(QUICK, {"fast": ("small",)}).served_elsewhere("slow") == {}


@pytest.mark.parametrize("requested", ["small", "small-instruct", "big", "huge", "medium", "nobody"])
@pytest.mark.parametrize("lane", ["fast", "mid", "slow"])
def test_a_declared_lane_is_asked_as_the_envoy_rewrite_asks_it(lane: str, requested: str) -> None:
    """The gateway and the envoy adapter's model rewrite choose the served model by one rule."""
    assert serve_as(MODELS, lane, requested) == serve_as_declared(CFG.lanes[lane], requested)
