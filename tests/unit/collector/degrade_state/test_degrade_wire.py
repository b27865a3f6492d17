"""The degrade wire model the gateway and the controller share."""

from __future__ import annotations

import pytest

from lanewatch.collector.degrade import state as controller
from lanewatch.collector.degrade_state import state as gateway
from lanewatch.collector.degrade_state.wire import (
    DegradeError,
    DegradePut,
    LaneDegrade,
    parse_lanes,
    parse_put,
)

ORDER = ["fast", "mid", "slow"]


def test_gateway_and_controller_use_one_model() -> None:
    assert gateway.LaneDegrade is controller.LaneSpec is LaneDegrade
    assert gateway.ACTIONS == controller.ACTIONS


def test_what_the_controller_sends_the_gateway_parses_back_equal() -> None:
    sent = {
        "slow": LaneDegrade("fast", 50),
        "fast": LaneDegrade(cap_max_tokens=64, shed_classes=("batch", "bulk")),
    }
    body = controller.lanes_to_json(sent)
    assert parse_lanes(body, ORDER) == sent


def test_normal_forms() -> None:
    d = LaneDegrade("fast", 50.0, shed_classes=("b", "a", "b"))
    assert d.shed_classes == ("a", "b")
    assert d.to_json()["shift_percent"] == 50
    assert isinstance(d.to_json()["shift_percent"], int)
    assert LaneDegrade("fast", 12.5).to_json()["shift_percent"] == 12.5
    assert LaneDegrade.from_json(d.to_json()) == d


def test_active_and_merge() -> None:
    shift, protect = LaneDegrade("fast", 50), LaneDegrade(cap_max_tokens=8, shed_classes=("batch",))
    merged = shift.merge(protect)
    assert merged.active() == ("shift", "cap_max_tokens", "shed")
    assert LaneDegrade().active() == ()


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"lanes": {"slow": {"shed_classes": [1]}}}, "lanes.slow.shed_classes: bad class name 1"),
        ({"lanes": {"slow": {"shed_classes": ["Batch"]}}}, "lanes.slow.shed_classes: bad class name 'Batch'"),
        ({"lanes": {"slow": {"shift_percent": 101, "shift_to": "fast"}}}, "lanes.slow.shift_percent"),
        ({"lanes": {"fast": {"shift_to": "slow", "shift_percent": 5}}}, "lanes.fast.shift_to"),
    ],
)
def test_bad_bodies_name_the_field(body: object, where: str) -> None:
    with pytest.raises(DegradeError, match=where):
        parse_lanes(body, ORDER)


def test_the_controllers_revision_travels_in_the_body() -> None:
    sent = {"slow": LaneDegrade("fast", 100)}
    body = controller.lanes_to_json(sent, 7)
    assert body["revision"] == 7
    assert parse_put(body, ORDER) == DegradePut(sent, 7)
    assert parse_put({"lanes": {}}, ORDER).revision is None  # an operator's PUT may leave it out
    assert parse_put({"lanes": {}, "revision": None}, ORDER).revision is None
    assert "revision" not in controller.lanes_to_json(sent)


@pytest.mark.parametrize("revision", [-1, 1.5, "3", True, [1]])
def test_a_bad_revision_is_refused_naming_it(revision: object) -> None:
    with pytest.raises(DegradeError, match="revision: must be an integer >= 0"):
        parse_put({"lanes": {}, "revision": revision}, ORDER)
