"""Collectors each guarding a share of a lane: one alert each; the lane holds until all resolve."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lanewatch.alerts.spec import DEFAULT_SPEC, load_spec
from lanewatch.collector.degrade.decision import on_notification, on_tick
from lanewatch.collector.degrade.state import ControllerState, desired_state
from lanewatch.collector.guard.settings import GuardConfig
from lanewatch.collector.guard.spec import guard_alerts
from tests.unit.collector.degrade.test_decision import T0, P, fire, note, res


def test_each_collector_s_alert_carries_its_instance_and_none_without_one() -> None:
    spec = load_spec(DEFAULT_SPEC)
    alone = {a.lane: dict(a.labels) for a in guard_alerts(spec)}
    a = {x.lane: dict(x.labels) for x in guard_alerts(spec, instance="collector-a")}
    b = {x.lane: dict(x.labels) for x in guard_alerts(spec, instance="collector-b")}
    assert all("instance" not in labels for labels in alone.values())
    for lane, labels in alone.items():
        assert a[lane] == {**labels, "instance": "collector-a"}
        assert a[lane] != b[lane]  # two alerts in Alertmanager, not one that either share resolves


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, 'quo"te'])
def test_an_instance_name_that_is_no_label_value_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="instance"):
        GuardConfig(instance=bad)


def test_the_lane_holds_until_every_share_has_resolved() -> None:
    state = ControllerState()
    for name in ("share-a", "share-b"):  # the two collectors' alerts, each its own fingerprint
        state = on_notification(P, state, note(fire(name)), T0 + 1).state
    assert "slow" in desired_state(state)
    state = on_notification(P, state, note(res("share-a")), T0 + 20).state
    state = on_tick(P, state, T0 + 60).state
    assert "slow" in desired_state(state)  # share b still misses
    state = on_notification(P, state, note(res("share-b")), T0 + 61).state
    state = on_tick(P, state, T0 + 80).state
    assert desired_state(state) == {}
