"""What the controller strips before an adapter applies, and reports as skipped."""

from __future__ import annotations

from lanewatch.collector.degrade.adapters import EnvoySettings, NginxSettings, restrict
from lanewatch.collector.degrade_state.wire import LaneDegrade

SHIFT = {"slow": LaneDegrade(shift_to="fast", shift_percent=50, cap_max_tokens=64)}


def test_a_router_that_cannot_rewrite_the_model_still_shifts_and_reports_the_rewrite_skipped() -> None:
    kept, dropped = restrict(SHIFT, NginxSettings.capabilities)
    assert kept == {"slow": LaneDegrade(shift_to="fast", shift_percent=50)}
    assert dropped == [("slow", "cap_max_tokens"), ("slow", "rewrite_model")]


def test_envoy_rewrites_the_model_of_a_shift_and_caps() -> None:
    assert restrict(SHIFT, EnvoySettings.capabilities) == (SHIFT, [])


def test_no_rewrite_is_skipped_where_nothing_shifts() -> None:
    shed = {"slow": LaneDegrade(shed_classes=("batch",))}
    assert restrict(shed, NginxSettings.capabilities) == (shed, [])
    assert restrict(SHIFT, frozenset({"cap_max_tokens"}))[1] == [("slow", "shift")]
