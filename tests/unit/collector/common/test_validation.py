"""One lane-name rule, one class-name rule and one URL rule: config, policy, wire and SLO specs agree."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lanewatch.alerts.spec import SpecError, parse_spec
from lanewatch.collector.common.validation import (
    check_class_name,
    check_http_url,
    check_lane_name,
    check_unique,
    duplicates,
    repeats,
)
from lanewatch.collector.config import ConfigError, DegradeConfig
from lanewatch.collector.degrade.policy import PolicySpec, ProtectStepSpec
from lanewatch.collector.degrade_state.wire import DegradeError, parse_lanes
from lanewatch.collector.gateway.settings import GatewayConfig, LaneConfig
from lanewatch.collector.probe.settings import RequestClass, Target

GOOD_LANES = ["fast", "slow", "a", "Lane_2", "gpu.h200-a", "x" * 32]
BAD_LANES = ["", "x" * 33, "fast:1", "fast lane", "fäst", "fast\r\nx-evil: 1", "a/b", "a,b"]

SPEC = """\
apiVersion: lanewatch/v1
kind: SLOSpec
metadata: {{name: mini}}
spec:
  slos:
    - name: ttft
      lanes: [{lane}]
      objective: 99
      latency: {{metric: ttft, threshold: 0.5}}
"""


def _target_ok(lane: str) -> bool:
    try:
        Target(name="t", url="http://127.0.0.1:8000", model="m", lane=lane)
    except ValidationError:
        return False
    return True


def _gateway_ok(lane: str) -> bool:
    try:
        GatewayConfig(lanes={lane: LaneConfig(upstreams=["http://127.0.0.1:8000"])})
    except ValidationError:
        return False
    return True


def _spec_ok(lane: str) -> bool:
    try:
        parse_spec(SPEC.format(lane=f'"{lane}"'), "spec.yaml")
    except SpecError:
        return False
    return True


def _policy_ok(lane: str) -> bool:
    try:
        PolicySpec(lane_order=["fast", lane] if lane != "fast" else [lane])
    except ValidationError:
        return False
    return True


def _rule_ok(lane: str) -> bool:
    try:
        check_lane_name(lane)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("lane", GOOD_LANES + BAD_LANES)
def test_every_place_takes_the_same_lane_names(lane: str) -> None:
    want = lane in GOOD_LANES
    got = (_rule_ok(lane), _target_ok(lane), _gateway_ok(lane), _spec_ok(lane), _policy_ok(lane))
    assert got == (want,) * 5


def test_the_lane_error_says_the_rule() -> None:
    with pytest.raises(ValidationError, match=r"bad lane name 'a:b': use letters, digits"):
        GatewayConfig(lanes={"a:b": LaneConfig(upstreams=["http://127.0.0.1:8000"])})


@pytest.mark.parametrize("name", ["batch", "interactive", "b2-x_y"])
def test_class_names_accepted(name: str) -> None:
    assert check_class_name(name) == name


@pytest.mark.parametrize("name", ["", "Batch", "2x", "a" * 33, "a b"])
def test_class_names_refused(name: str) -> None:
    with pytest.raises(ValueError, match="bad class name"):
        check_class_name(name)


def _accepted(build: object, name: str) -> bool:
    assert callable(build)
    try:
        build(name)
    except (ValueError, DegradeError):  # ValidationError is a ValueError
        return False
    return True


CLASS_PLACES = [
    check_class_name,
    lambda n: RequestClass(name=n),
    lambda n: GatewayConfig(default_class=n),
    lambda n: ProtectStepSpec(shed_classes=[n]),
    lambda n: Target(name="t", url="http://h", model="m", classes=[n]),
    lambda n: parse_lanes({"lanes": {"slow": {"shed_classes": [n]}}}, ["fast", "slow"]),
]


@pytest.mark.parametrize("name", ["batch", "b2-x_y", "", "Batch", "2x", "a" * 33, "a:b"])
def test_every_place_takes_the_same_class_names(name: str) -> None:
    want = _accepted(check_class_name, name)
    assert [_accepted(place, name) for place in CLASS_PLACES] == [want] * len(CLASS_PLACES)


def test_one_helper_finds_repeats() -> None:
    assert repeats([("a", 1), ("b", 2), ("a", 3), ("a", 4)]) == [("a", 1, 3), ("a", 1, 4)]
    assert duplicates(["x", "y", "x", "z", "y", "x"]) == ["x", "y"]
    assert check_unique(["x", "y"], "lane names") == ["x", "y"]
    with pytest.raises(ValueError, match="duplicate lane names: y, x"):
        check_unique(["x", "y", "y", "x"], "lane names")


def test_a_spec_error_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"invalid SLO spec spec\.yaml") as info:
        parse_spec(SPEC.format(lane='"a:b"'), "spec.yaml")
    assert isinstance(info.value, SpecError) and info.value.issues[0].path.startswith("spec.slos.0.lanes")


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("https://h/v1/", "https://h/v1"),
        ("http://h//", "http://h"),
    ],
)
def test_urls_lose_their_trailing_slash(url: str, want: str) -> None:
    assert check_http_url(url) == want


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("127.0.0.1:8000", "must start with http"),
        ("ftp://h", "must start with http"),
        ("http://", "no host"),
        ("http:///x", "no host"),
        ("http://h/a b", "whitespace"),
    ],
)
def test_bad_urls_refused_with_the_reason(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_http_url(url)


@pytest.mark.parametrize(
    "build",
    [
        lambda url: Target(name="t", url=url, model="m"),
        lambda url: Target(name="t", url="http://h", metrics_url=url, model="m"),
        lambda url: LaneConfig(upstreams=[url]),
        lambda url: GatewayConfig(collector_url=url),
        lambda url: GatewayConfig(otlp_endpoint=url),
        lambda url: DegradeConfig.model_validate({"gateway_url": url}),  # the flat keys of older configs
        lambda url: DegradeConfig.model_validate({"adapters": ["webhook"], "webhook_url": url}),
        lambda url: DegradeConfig(adapters=[{"kind": "gateway", "url": url}]),
        lambda url: DegradeConfig(adapters=[{"kind": "webhook", "url": url}]),
    ],
)
def test_every_url_field_uses_the_one_rule(build: object) -> None:
    assert callable(build)
    with pytest.raises(ValidationError, match="must start with http"):
        build("127.0.0.1:9")
    with pytest.raises(ValidationError, match="no host"):
        build("http://")


def test_collector_url_is_cut_back_to_its_base() -> None:
    assert GatewayConfig(collector_url="http://h:9464/v1/records/").collector_url == "http://h:9464"
