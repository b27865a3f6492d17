"""Which lane owns a model more than one lane serves: declared wins, then first learned, then rank."""

from __future__ import annotations

from typing import Any

from lanewatch.collector.gateway.admission.lane_models import LaneModels
from lanewatch.collector.gateway.admission.model_ownership import Collision, decide_owners
from lanewatch.collector.gateway.admission.routing import RouteInput, RouteTable, choose_lane
from lanewatch.collector.gateway.settings import GatewayConfig

RANKED = ("fast", "slow")  # fast is the default lane here, then the others fastest first


def test_a_declared_model_stays_with_its_lane_whatever_the_default_lane_lists() -> None:
    owned = decide_owners({"slow": ("big",)}, {"fast": ("small", "big")}, {}, RANKED)
    assert owned.owners == {"big": "slow", "small": "fast"}
    assert owned.elsewhere("fast") == {"big": "slow"}
    assert owned.collisions == {Collision("big", "slow", "fast")}


def test_a_declared_model_wins_over_the_lane_that_listed_it_first() -> None:
    owned = decide_owners({"slow": ("big",)}, {"fast": ("big",)}, {"big": "fast"}, RANKED)
    assert owned.owners["big"] == "slow"


def test_the_first_lane_to_list_a_learned_model_keeps_it_through_refreshes() -> None:
    first = decide_owners({}, {"fast": ("small",), "slow": ("big",)}, {}, RANKED)
    assert first.owners == {"small": "fast", "big": "slow"} and not first.collisions
    later = decide_owners({}, {"fast": ("small", "big"), "slow": ("big",)}, first.owners, RANKED)
    assert later.owners == {"small": "fast", "big": "slow"}  # the default lane began to list it: not its
    assert later.collisions == {Collision("big", "slow", "fast")}
    again = decide_owners({}, {"fast": ("small", "big"), "slow": ("big",)}, later.owners, RANKED)
    assert (again.owners, again.collisions) == (later.owners, later.collisions)  # stable


def test_a_learned_model_is_released_only_when_its_owner_stops_listing_it() -> None:
    held = {"small": "fast", "big": "slow"}
    gone = decide_owners({}, {"fast": ("small", "big"), "slow": ("other",)}, held, RANKED)
    assert gone.owners == {"small": "fast", "big": "fast", "other": "slow"} and not gone.collisions
    back = decide_owners({}, {"fast": ("small", "big"), "slow": ("big",)}, gone.owners, RANKED)
    assert back.owners["big"] == "fast"  # the new owner listed it first now: it keeps it
    assert back.collisions == {Collision("big", "fast", "slow")}


def test_a_model_two_lanes_list_first_at_once_goes_to_the_default_lane_then_lane_order() -> None:
    both = {"fast": ("m",), "mid": ("m",), "slow": ("m",)}
    assert decide_owners({}, both, {}, ("slow", "fast", "mid")).owners == {"m": "slow"}
    two = {"fast": ("m",), "mid": ("m",)}
    assert decide_owners({}, two, {}, ("slow", "fast", "mid")).owners == {"m": "fast"}


def test_two_lanes_declaring_one_model_are_no_collision() -> None:
    owned = decide_owners({"fast": ("m",), "slow": ("m",)}, {}, {}, ("slow", "fast"))
    assert owned.owners == {"m": "slow"} and not owned.collisions


def test_what_the_upstreams_of_a_declaring_lane_list_is_ignored() -> None:
    owned = decide_owners({"slow": ("big",)}, {"slow": ("other",), "fast": ("other",)}, {}, RANKED)
    assert owned.owners == {"big": "slow", "other": "fast"} and not owned.collisions


def _cfg(default: str, **lanes: dict[str, Any]) -> GatewayConfig:
    return GatewayConfig.model_validate(
        {
            "lanes": {k: {"upstreams": ["http://x"], **v} for k, v in lanes.items()},
            "lane_order": list(lanes),
            "default_lane": default,
        }
    )


def _route(models: LaneModels, cfg: GatewayConfig, model: str) -> str:
    table = RouteTable.from_config(cfg)
    table = RouteTable(
        lanes=table.lanes,
        default_lane=table.default_lane,
        models=table.models,
        served_elsewhere=models.served_elsewhere(table.default_lane),
    )
    return choose_lane(table, RouteInput(model=model)).lane


def test_a_request_for_the_slow_lanes_declared_model_goes_to_slow_when_the_default_lane_lists_it() -> None:
    cfg = _cfg("fast", fast={}, slow={"models": ["big"]})
    models = LaneModels.from_config(cfg, {"fast": ("small", "big")})
    assert _route(models, cfg, "big") == "slow"
    assert _route(models, cfg, "small") == "fast"


def test_a_request_for_the_slow_lanes_learned_model_stays_on_slow_after_the_default_lane_lists_it() -> None:
    cfg = _cfg("fast", fast={}, slow={})
    first = LaneModels.from_config(cfg, {"fast": ("small",), "slow": ("big",)})
    later = LaneModels.from_config(cfg, {"fast": ("small", "big"), "slow": ("big",)}, first.owners)
    assert _route(later, cfg, "big") == "slow"
    assert later.collisions == {Collision("big", "slow", "fast")}
