"""One lane-name rule and one URL rule: config targets, gateway lanes and SLO specs agree."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lanewatch.alerts.spec import SpecError, parse_spec
from lanewatch.collector.common.names import check_class_name, check_http_url, check_lane_name
from lanewatch.collector.config import DegradeConfig, GatewayConfig, LaneConfig, Target

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


def _rule_ok(lane: str) -> bool:
    try:
        check_lane_name(lane)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("lane", GOOD_LANES + BAD_LANES)
def test_every_place_takes_the_same_lane_names(lane: str) -> None:
    want = lane in GOOD_LANES
    assert (_rule_ok(lane), _target_ok(lane), _gateway_ok(lane), _spec_ok(lane)) == (want,) * 4


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
        lambda url: DegradeConfig(gateway_url=url),
        lambda url: DegradeConfig(webhook_url=url),
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
