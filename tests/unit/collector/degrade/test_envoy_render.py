"""The Envoy route file rendered from the shipped route template: exact text, refusals, read-back."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lanewatch.collector.degrade.adapters import AdapterError
from lanewatch.collector.degrade.adapters.envoy_render import (
    EnvoyTemplate,
    held_lanes,
    parse_template,
    render,
    render_text,
    shed_match,
    validation_bootstrap,
)
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.layout import ROOT

GOLDEN = Path(__file__).parent / "golden"
SHIPPED = ROOT / "deploy" / "envoy" / "routes.template.yaml"
DEGRADED = {
    "slow": LaneDegrade(shift_to="fast", shift_percent=50, shed_classes=("batch",)),
    "fast": LaneDegrade(shed_classes=("batch",)),
}


def _template() -> EnvoyTemplate:
    return parse_template(SHIPPED.read_text())


def test_the_shipped_template_names_its_lanes_and_classes() -> None:
    t = _template()
    assert (t.name, t.clusters, sorted(t.classes), t.retry_after_s) == (
        "lanes",
        {"slow": "slow", "fast": "fast"},
        ["batch"],
        30,
    )


@pytest.mark.parametrize(
    ("lanes", "golden"),
    [({}, "envoy-routes-none.yaml"), (DEGRADED, "envoy-routes-degraded.yaml")],
)
def test_render_is_the_golden_text(lanes: dict[str, LaneDegrade], golden: str) -> None:
    assert render_text(render(_template(), lanes)) == (GOLDEN / golden).read_text()


def test_no_degrade_renders_the_template_as_written() -> None:
    t = _template()
    assert render(t, {}) == t.route_config
    assert yaml.safe_load(render_text(render(t, {})))["resources"][0]["@type"].endswith("RouteConfiguration")


def test_a_full_shift_sends_every_request_of_the_lane_to_the_faster_cluster() -> None:
    routes = render(_template(), {"slow": LaneDegrade(shift_to="fast", shift_percent=100)})
    slow = routes["virtual_hosts"][0]["routes"][0]
    assert slow["route"] == {
        "timeout": "0s",
        "weighted_clusters": {"clusters": [{"name": "slow", "weight": 0}, {"name": "fast", "weight": 1000}]},
    }


BOTH_ALERT = {
    "slow": LaneDegrade(shift_to="fast", shift_percent=100),
    "fast": LaneDegrade(shed_classes=("batch",)),
}
HALF_BOTH = {**BOTH_ALERT, "slow": LaneDegrade(shift_to="fast", shift_percent=50)}


@pytest.mark.parametrize(
    "lanes", [{}, DEGRADED, BOTH_ALERT, HALF_BOTH, {"slow": LaneDegrade(shift_to="fast", shift_percent=12.5)}]
)
def test_what_envoy_holds_reads_back_into_the_lanes(lanes: dict[str, LaneDegrade]) -> None:
    t = _template()
    assert held_lanes(t, render(t, lanes)) == lanes


def test_a_shed_route_adds_the_class_rule_to_the_lane_route_match() -> None:
    t = parse_template(SHIPPED.read_text().replace("  batch:\n", "  batch:\n    prefix: /batch/\n"))
    shed = render(t, {"slow": LaneDegrade(shed_classes=("batch",))})["virtual_hosts"][0]["routes"][0]
    assert shed["match"] == {
        "prefix": "/batch/",
        "headers": [
            {"name": "x-lanewatch-lane", "string_match": {"exact": "slow"}},
            {"name": "x-tenant-tier", "string_match": {"exact": "batch"}},
        ],
    }
    assert shed["direct_response"]["status"] == 429
    assert {
        "header": {"key": "retry-after", "value": "30"},
        "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
    } in (shed["response_headers_to_add"])


@pytest.mark.parametrize(
    ("lanes", "message"),
    [
        ({"turbo": LaneDegrade(shed_classes=("batch",))}, "lane 'turbo' has no route in the route template"),
        ({"slow": LaneDegrade(shift_to="gpu9", shift_percent=50)}, "lanes.slow.shift_to: lane 'gpu9'"),
        ({"slow": LaneDegrade(shed_classes=("bulk",))}, "class 'bulk' has no match rule"),
    ],
)
def test_a_state_the_template_cannot_hold_is_refused(lanes: dict[str, LaneDegrade], message: str) -> None:
    with pytest.raises(AdapterError, match=message) as caught:
        render(_template(), lanes)
    assert not caught.value.retryable


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("route_config: [", "not YAML"),
        ("routes: {}\n", "unknown keys"),
        ("route_config: {virtual_hosts: []}\n", "with a `name`"),
        (
            "route_config: {name: r, virtual_hosts: [{name: v, domains: ['*'], routes: []}]}\n",
            "no route is marked",
        ),
        (
            "route_config: {name: r, virtual_hosts: [{name: v, routes: [{match: {prefix: /}, "
            "metadata: {filter_metadata: {lanewatch: {lane: 'a:b'}}}, route: {cluster: c}}]}]}\n",
            "bad lane name",
        ),
        (
            "route_config: {name: r, virtual_hosts: [{name: v, routes: [{match: {prefix: /}, "
            "metadata: {filter_metadata: {lanewatch: {lane: a}}}, direct_response: {status: 200}}]}]}\n",
            "needs a `match` and `route.cluster`",
        ),
        (SHIPPED.read_text().replace("  batch:", "  Batch:"), "bad class name"),
        (
            SHIPPED.read_text().replace("    headers:", "    method: POST\n    headers:", 1),
            "classes.batch: a match rule",
        ),
        (SHIPPED.read_text().replace("retry_after_s: 30", "retry_after_s: -1"), "retry_after_s"),
    ],
)
def test_a_template_that_does_not_parse_names_its_key(text: str, message: str) -> None:
    with pytest.raises(AdapterError, match=message):
        parse_template(text)


def test_the_validation_bootstrap_holds_the_routes_inline_with_their_clusters() -> None:
    routes = render(_template(), DEGRADED)
    boot = validation_bootstrap(routes)
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["route_config"] == routes
    assert [c["name"] for c in boot["static_resources"]["clusters"]] == ["fast", "slow"]
    assert boot["node"] == {"id": "validate", "cluster": "validate"}


def test_a_full_shift_to_a_lane_that_sheds_a_class_sheds_that_class_before_the_shift() -> None:
    shed, shift = render(_template(), BOTH_ALERT)["virtual_hosts"][0]["routes"][:2]
    assert shed["match"]["headers"] == [
        {"name": "x-lanewatch-lane", "string_match": {"exact": "slow"}},
        {"name": "x-tenant-tier", "string_match": {"exact": "batch"}},
    ]
    assert "runtime_fraction" not in shed["match"] and shed["direct_response"]["status"] == 429
    assert shed["metadata"]["filter_metadata"]["lanewatch"] == {
        "lane": "slow",
        "shed": "batch",
        "serving": "fast",
    }
    assert shift["route"]["weighted_clusters"]["clusters"][1] == {"name": "fast", "weight": 1000}


def test_a_partial_shift_sheds_the_moved_share_of_the_class_and_keeps_the_rest_on_its_lane() -> None:
    shed, keep, shift = render(_template(), HALF_BOTH)["virtual_hosts"][0]["routes"][:3]
    assert shed["match"]["runtime_fraction"]["default_value"] == {
        "numerator": 5000,
        "denominator": "TEN_THOUSAND",
    }
    assert keep["match"] == {k: v for k, v in shed["match"].items() if k != "runtime_fraction"}
    assert (keep["route"], "weighted_clusters" in shift["route"]) == (
        {"cluster": "slow", "timeout": "0s"},
        True,
    )


def test_a_class_both_lanes_shed_renders_one_shed_route() -> None:
    lanes = {**BOTH_ALERT, "slow": LaneDegrade(shift_to="fast", shift_percent=100, shed_classes=("batch",))}
    names = [r.get("name") for r in render(_template(), lanes)["virtual_hosts"][0]["routes"]]
    assert names == ["lanewatch-shed-slow-batch", None, "lanewatch-shed-fast-batch", None]


LANE_BY_PATH = {"prefix": "/slow/", "headers": [{"name": "x-a", "present_match": True}]}


@pytest.mark.parametrize(
    ("rule", "header"),
    [
        ({"prefix": "/slow/v1/batch/"}, {"prefix": "/slow/v1/batch/"}),
        ({"path": "/slow/v1/b.c"}, {"safe_regex": {"regex": r"/slow/v1/b\.c(\?.*)?"}}),
        ({"path_separated_prefix": "/slow/v1"}, {"safe_regex": {"regex": r"/slow/v1([/?].*)?"}}),
        ({"safe_regex": {"regex": "(/slow)?/v1/x"}}, {"safe_regex": {"regex": r"(?:(/slow)?/v1/x)(\?.*)?"}}),
    ],
)
def test_a_class_path_rule_joins_the_lane_route_path_rule_as_a_path_header(
    rule: dict[str, object], header: dict[str, object]
) -> None:
    match = shed_match(LANE_BY_PATH, {**rule, "headers": [{"name": "x-b", "present_match": True}]}, "here")
    assert match == {
        "prefix": "/slow/",
        "headers": [
            {"name": "x-a", "present_match": True},
            {"name": ":path", "string_match": header},
            {"name": "x-b", "present_match": True},
        ],
    }


def test_a_lane_route_that_takes_every_path_gives_way_to_the_class_path_rule() -> None:
    assert shed_match({"prefix": "/"}, {"path": "/v1/completions"}, "here") == {"path": "/v1/completions"}


def test_a_class_path_template_swaps_places_with_the_lane_path_rule() -> None:
    policy = {"name": "envoy.path.match.uri_template", "typed_config": {}}
    match = shed_match({"path": "/Slow/x", "case_sensitive": False}, {"path_match_policy": policy}, "here")
    assert match == {
        "path_match_policy": policy,
        "case_sensitive": False,
        "headers": [{"name": ":path", "string_match": {"safe_regex": {"regex": r"(?i)/Slow/x(\?.*)?"}}}],
    }
    with pytest.raises(AdapterError, match="both match a path template"):
        shed_match({"path_match_policy": policy}, {"path_match_policy": policy}, "here")


@pytest.mark.parametrize(
    ("lane", "rule"),
    [
        ({"prefix": "/slow/"}, {"prefix": "/v1/batch/"}),
        ({"prefix": "/slow/"}, {"path": "/v1/batch/jobs"}),
        ({"path": "/slow/x"}, {"prefix": "/v1/"}),
        ({"prefix": "/slow/"}, {"path_separated_prefix": "/v1"}),
    ],
)
def test_path_rules_that_match_no_path_together_are_refused(
    lane: dict[str, str], rule: dict[str, str]
) -> None:
    with pytest.raises(AdapterError, match="match no path together") as caught:
        shed_match(lane, rule, "lane 'slow', class 'batch'")
    assert not caught.value.retryable
    assert shed_match(
        {**lane, "case_sensitive": False}, {"prefix": lane.get("prefix", "/slow/").upper()}, "x"
    )


def test_the_validation_bootstrap_stubs_every_cluster_the_routes_name() -> None:
    rc = render(_template(), DEGRADED)
    host = rc["virtual_hosts"][0]
    host["request_mirror_policies"] = [{"cluster": "vhost-mirror"}]
    host["routes"][-1]["route"]["request_mirror_policies"] = [{"cluster": "route-mirror"}]
    host["routes"].append(
        {
            "match": {"prefix": "/x/"},
            "route": {"weighted_clusters": {"clusters": [{"name": "weighted-only", "weight": 1}]}},
            "typed_per_filter_config": {
                "envoy.filters.http.ext_authz": {"grpc_service": {"envoy_grpc": {"cluster_name": "authz"}}}
            },
        }
    )
    clusters = validation_bootstrap(rc)["static_resources"]["clusters"]
    assert [c["name"] for c in clusters] == [
        "authz",
        "fast",
        "route-mirror",
        "slow",
        "vhost-mirror",
        "weighted-only",
    ]
