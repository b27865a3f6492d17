"""Envoy's shed by work, rendered: a work class has no route, the lanes' routes carry its ranges."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lanewatch.collector.degrade.adapters import AdapterError
from lanewatch.collector.degrade.adapters.envoy_lua import LUA_FILTER, MODEL_REWRITE_LUA
from lanewatch.collector.degrade.adapters.envoy_render import (
    ModelRewrite,
    held_lanes,
    parse_template,
    render,
    rewrites_model,
)
from lanewatch.collector.degrade_state.served_models import ServedModels
from lanewatch.collector.degrade_state.wire import LaneDegrade

TEMPLATE = """
classes:
  batch:
    headers: [{name: x-tenant-tier, string_match: {exact: batch}}]
  long:
    work: {min: 1000}
  "on":
    work: {min: 10, max: 20}
route_config:
  name: lanes
  virtual_hosts:
    - name: llm
      domains: ["*"]
      routes:
        - match: {prefix: /, headers: [{name: x-lanewatch-lane, string_match: {exact: slow}}]}
          metadata: {filter_metadata: {lanewatch: {lane: slow}}}
          route: {cluster: slow, timeout: 0s}
        - match: {prefix: /}
          metadata: {filter_metadata: {lanewatch: {lane: fast}}}
          route: {cluster: fast, timeout: 0s}
"""


def _routes(rc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        r["metadata"]["filter_metadata"]["lanewatch"]["lane"]: r for r in rc["virtual_hosts"][0]["routes"]
    }


def _shed(config: dict[str, Any] | None) -> list[list[Any]] | None:
    return None if config is None else config[LUA_FILTER]["filter_context"].get("shed")


def test_a_work_class_sheds_on_the_lanes_own_route_and_reads_back() -> None:
    t = parse_template(TEMPLATE)
    state = {"fast": LaneDegrade(shed_classes=("long", "on"))}
    rc = render(t, state)
    routes = _routes(rc)
    assert len(rc["virtual_hosts"][0]["routes"]) == 2  # no shed route of its own
    assert _shed(routes["fast"]["typed_per_filter_config"]) == [
        ['"long"', 1000, -1, "fast"],
        ['"on"', 10, 20, "fast"],
    ]
    assert (
        routes["fast"]["typed_per_filter_config"][LUA_FILTER]["source_code"]["inline_string"]
        == MODEL_REWRITE_LUA
    )
    assert routes["fast"]["request_body_buffer_limit"] > 1024 * 1024
    assert "typed_per_filter_config" not in routes["slow"]
    assert rewrites_model(rc)  # the listener's Lua filter is needed
    assert held_lanes(t, rc) == state


def test_a_shifted_request_obeys_the_serving_lanes_shed_by_work_and_keeps_its_rewrite() -> None:
    t = parse_template(TEMPLATE)
    state = {
        "slow": LaneDegrade(shift_to="fast", shift_percent=50, shed_classes=("batch",)),
        "fast": LaneDegrade(shed_classes=("long",)),
    }
    models = {"slow": ServedModels(models=["big"]), "fast": ServedModels(models=["small"])}
    rc = render(t, state, ModelRewrite(models))
    slow = _routes(rc)["slow"]
    own, moved = slow["route"]["weighted_clusters"]["clusters"]
    assert "typed_per_filter_config" not in own  # served by slow, which sheds no work class
    ctx = moved["typed_per_filter_config"][LUA_FILTER]["filter_context"]
    assert ctx["shed"] == [['"long"', 1000, -1, "fast"]]
    assert json.loads(ctx["default"]) == "small"  # the rewrite rides on the same script
    assert held_lanes(t, rc) == state


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("{work: {min: 10}, path: /v1/completions}", "stands alone"),
        ("{work: {}}", "give min, max or both"),
        ("{work: {min: -1}}", "whole number"),
        ("{work: {min: true}}", "whole number"),
        ("{work: {min: 20, max: 10}}", "min 20 > max 10"),
        ("{work: {least: 10}}", "give min, max or both"),
    ],
)
def test_a_bad_work_rule_is_refused_naming_it(rule: str, message: str) -> None:
    text = TEMPLATE.replace("long:\n    work: {min: 1000}", f"long: {rule}", 1)
    with pytest.raises(AdapterError, match=message):
        parse_template(text)


def test_a_cap_rides_on_the_lanes_routes_with_the_serving_lanes_cap_and_reads_back() -> None:
    t = parse_template(TEMPLATE)
    state = {
        "slow": LaneDegrade(shift_to="fast", shift_percent=50, cap_max_tokens=256),
        "fast": LaneDegrade(cap_max_tokens=3),
    }
    rc = render(t, state)
    routes = _routes(rc)
    own, moved = routes["slow"]["route"]["weighted_clusters"]["clusters"]
    assert own["typed_per_filter_config"][LUA_FILTER]["filter_context"]["caps"] == [["slow", 256]]
    # served by fast: the smaller of the two caps holds (the script takes the least)
    assert moved["typed_per_filter_config"][LUA_FILTER]["filter_context"]["caps"] == [
        ["slow", 256],
        ["fast", 3],
    ]
    assert "shed" not in moved["typed_per_filter_config"][LUA_FILTER]["filter_context"]
    assert routes["fast"]["typed_per_filter_config"][LUA_FILTER]["filter_context"]["caps"] == [["fast", 3]]
    assert held_lanes(t, rc) == state
