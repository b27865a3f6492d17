"""The model rewrite in the rendered Envoy routes: on the faster lane's cluster weight only, when the
lanes' models differ; its settings as JSON literals; the lanes' models as one definition."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from lanewatch.collector.degrade.adapters import EnvoySettings
from lanewatch.collector.degrade.adapters.envoy_lua import (
    LUA_FILTER,
    LUA_PER_ROUTE,
    MODEL_REWRITE_LUA,
    needs_rewrite,
)
from lanewatch.collector.degrade.adapters.envoy_render import (
    ModelRewrite,
    held_lanes,
    parse_template,
    render,
    render_text,
    rewrites_model,
    validation_bootstrap,
)
from lanewatch.collector.degrade_state.served_models import ServedModels, serve_as_declared
from lanewatch.collector.degrade_state.wire import LaneDegrade
from lanewatch.collector.gateway.settings import LaneConfig
from tests.layout import ROOT

TEMPLATE = parse_template((ROOT / "deploy" / "envoy" / "routes.template.yaml").read_text())
BIG, SMALL = ServedModels(models=["big"]), ServedModels(models=["small", "on"], model_map={"big-chat": "on"})
REWRITE = ModelRewrite({"slow": BIG, "fast": SMALL}, max_bytes=4096)
HALF = {"slow": LaneDegrade(shift_to="fast", shift_percent=50)}


def _weights(rc: dict[str, Any]) -> list[dict[str, Any]]:
    clusters: list[dict[str, Any]] = rc["virtual_hosts"][0]["routes"][0]["route"]["weighted_clusters"][
        "clusters"
    ]
    return clusters


def test_the_rewrite_rides_on_the_faster_cluster_weight_only() -> None:
    slow, fast = _weights(render(TEMPLATE, HALF, REWRITE))
    assert (slow, fast["name"], fast["weight"]) == ({"name": "slow", "weight": 500}, "fast", 500)
    per_route = fast["typed_per_filter_config"][LUA_FILTER]
    assert per_route == {
        "@type": LUA_PER_ROUTE,
        "source_code": {"inline_string": MODEL_REWRITE_LUA},
        "filter_context": {
            "default": '"small"',
            "serves": ['"small"', '"on"'],
            "map": [['"big-chat"', '"on"']],
            "max_bytes": 4096,
        },
    }


def test_model_names_reach_envoy_as_json_strings_whatever_yaml_would_make_of_them() -> None:
    text = render_text(render(TEMPLATE, HALF, REWRITE))
    ctx = yaml.safe_load(text)["resources"][0]["virtual_hosts"][0]["routes"][0]["route"]
    context = ctx["weighted_clusters"]["clusters"][1]["typed_per_filter_config"][LUA_FILTER]["filter_context"]
    assert [json.loads(m) for m in context["serves"]] == ["small", "on"]  # `on` is not read as true


@pytest.mark.parametrize(
    ("lanes", "rewrite"),
    [
        (HALF, None),  # no lanes' models configured
        (HALF, ModelRewrite({"slow": BIG, "fast": BIG})),  # the lanes serve one model
        (HALF, ModelRewrite({"slow": BIG})),  # the faster lane's models are not declared
        (HALF, ModelRewrite({"slow": BIG, "fast": ServedModels(models=["small", "big"])})),  # fast serves big
        ({"slow": LaneDegrade(shed_classes=("batch",))}, REWRITE),  # no shift
    ],
)
def test_no_rewrite_is_rendered_where_none_is_needed(
    lanes: dict[str, LaneDegrade], rewrite: ModelRewrite | None
) -> None:
    rc = render(TEMPLATE, lanes, rewrite)
    assert not rewrites_model(rc)
    assert MODEL_REWRITE_LUA not in json.dumps(rc)


def test_a_rewrite_renders_when_the_slower_lane_models_are_unknown() -> None:
    assert needs_rewrite(None, SMALL) and needs_rewrite(ServedModels(), SMALL)
    assert rewrites_model(render(TEMPLATE, HALF, ModelRewrite({"fast": SMALL})))


def test_the_read_back_ignores_the_rewrite() -> None:
    assert held_lanes(TEMPLATE, render(TEMPLATE, HALF, REWRITE)) == HALF


def test_the_validation_bootstrap_runs_the_lua_filter_before_the_router() -> None:
    boot = validation_bootstrap(render(TEMPLATE, HALF, REWRITE))
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert [f["name"] for f in hcm["http_filters"]] == [LUA_FILTER, "envoy.filters.http.router"]


def test_the_shipped_bootstrap_runs_the_lua_filter_before_the_router() -> None:
    boot = yaml.safe_load((ROOT / "deploy" / "envoy" / "bootstrap.yaml").read_text())
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert [f["name"] for f in hcm["http_filters"]] == [LUA_FILTER, "envoy.filters.http.router"]


def test_gateway_lanes_and_envoy_lanes_declare_models_alike() -> None:
    lane = {"models": ["small", "on"], "model_map": {"big-chat": "on"}}
    envoy = EnvoySettings(lanes={"fast": lane})
    gateway = LaneConfig(upstreams=["http://127.0.0.1:8000"], **lane)
    assert envoy.lanes["fast"] == SMALL == ServedModels.model_validate(gateway.model_dump(include=set(lane)))
    for bad in ({"model_map": {"x": "small"}}, {"models": ["a"], "model_map": {"x": "b"}}):
        with pytest.raises(ValidationError, match="model_map"):
            EnvoySettings(lanes={"fast": bad})
        with pytest.raises(ValidationError, match="model_map"):
            LaneConfig(upstreams=["http://127.0.0.1:8000"], **bad)


@pytest.mark.parametrize(
    ("requested", "served"), [("big", "small"), ("big-chat", "on"), ("on", "on"), ("small", "small")]
)
def test_serve_as_declared_is_what_the_script_does(requested: str, served: str) -> None:
    assert serve_as_declared(SMALL, requested) == served


def test_a_rewriting_route_buffers_the_bound_and_a_margin_and_no_other_route_changes_its_limit() -> None:
    rewriting = render(TEMPLATE, HALF, REWRITE)["virtual_hosts"][0]["routes"][0]
    assert rewriting["request_body_buffer_limit"] == 4096 + 64 * 1024
    plain = render(TEMPLATE, HALF)["virtual_hosts"][0]["routes"]
    assert all("request_body_buffer_limit" not in r for r in plain)
