"""Events from diffs: Alertmanager's alert list (API v2 shape) and the gateway's degrade state."""

from __future__ import annotations

import datetime as dt
from typing import Any

from lanewatch.collector.demo.events import (
    KINDS,
    Event,
    alert_changes,
    controller_alerts,
    degrade_changes,
    lane_actions,
    story_complete,
)

NOW = 1_800_000_000.0


def rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat().replace("+00:00", "Z")


def am_alert(
    name: str, lane: str, severity: str, state: str = "active", ends_in: float = 60.0
) -> dict[str, Any]:
    """One alert as Alertmanager 0.25's GET /api/v2/alerts lists it."""
    return {
        "labels": {"alertname": name, "lane": lane, "severity": severity, "slo": "ttft"},
        "annotations": {"summary": "x"},
        "startsAt": rfc3339(NOW - 5),
        "endsAt": rfc3339(NOW + ends_in),
        "updatedAt": rfc3339(NOW),
        "fingerprint": f"{name}{lane}{severity}",
        "receivers": [{"name": "lanewatch-degrade"}],
        "status": {"state": state, "silencedBy": [], "inhibitedBy": []},
        "generatorURL": "http://prometheus/graph",
    }


PAGE = am_alert("LanewatchTTFTBurnRate", "slow", "page")


def test_only_alerts_routed_to_the_controller_count() -> None:
    guard = am_alert("LanewatchTTFTMitigation", "slow", "mitigate")
    guard["labels"] |= {"action": "degrade", "source": "guard"}
    alerts = [
        PAGE,
        am_alert("LanewatchTTFTBurnRate", "slow", "ticket"),  # tickets go to people only
        am_alert("LanewatchLaneConvergence", "fast", "ticket"),  # convergence goes to the controller
        am_alert("SomeoneElsesAlert", "slow", "page"),
        am_alert("LanewatchTPOTBurnRate", "slow", "page", ends_in=-1),  # resolved, endsAt passed
        am_alert("LanewatchTPOTBurnRate", "fast", "page", state="unprocessed"),
        guard,  # the fast guard's mitigation alert goes to the controller
        am_alert("LanewatchTTFTMitigation", "fast", "mitigate"),  # no action=degrade: not routed there
    ]
    assert sorted(controller_alerts(alerts, NOW)) == [
        ("LanewatchLaneConvergence", "fast", "ticket", "ttft", "rules"),
        ("LanewatchTTFTBurnRate", "slow", "page", "ttft", "rules"),
        ("LanewatchTTFTMitigation", "slow", "mitigate", "ttft", "guard"),
    ]


def test_an_alert_fires_once_and_resolves_once() -> None:
    firing, events = alert_changes(set(), [PAGE], NOW)
    assert [(e.kind, e.details["alertname"], e.details["lane"]) for e in events] == [
        ("alert_firing", "LanewatchTTFTBurnRate", "slow")
    ]
    assert events[0].details["starts_at"] == NOW - 5 and events[0].t == NOW
    again, repeat = alert_changes(firing, [PAGE], NOW + 1)
    assert again == firing and repeat == []
    gone, resolved = alert_changes(firing, [], NOW + 2)
    assert gone == set() and [(e.kind, e.t) for e in resolved] == [("alert_resolved", NOW + 2)]


def test_degrade_applied_changed_and_restored() -> None:
    shift = {"shift_to": "fast", "shift_percent": 50, "cap_max_tokens": None, "shed_classes": []}
    state = {"lanes": {"slow": shift}, "lane_order": ["fast", "slow"], "version": 1}
    held, events = degrade_changes({}, state, NOW)
    assert held == {"slow": {"shift_to": "fast", "shift_percent": 50}}
    assert [e.to_json() for e in events] == [
        {
            "t": NOW,
            "kind": "degrade_applied",
            "lane": "slow",
            "shift_to": "fast",
            "shift_percent": 50,
            "version": 1,
        }
    ]
    assert degrade_changes(held, state, NOW + 1)[1] == []
    more = {"lanes": {"slow": {**shift, "shift_percent": 100}}, "version": 2}
    held, events = degrade_changes(held, more, NOW + 2)
    assert [(e.kind, e.details["shift_percent"]) for e in events] == [("degrade_applied", 100)]
    held, events = degrade_changes(held, {"lanes": {}, "version": 3}, NOW + 3)
    assert held == {} and [(e.kind, e.details["lane"]) for e in events] == [("degrade_restored", "slow")]


def test_a_lane_listed_with_nothing_on_is_not_degraded() -> None:
    idle: dict[str, Any] = {"shift_to": None, "shift_percent": 0, "cap_max_tokens": None, "shed_classes": []}
    assert lane_actions(idle) == {}
    assert lane_actions({"shift_to": "fast", "shift_percent": 0}) == {}
    assert lane_actions({"cap_max_tokens": 256, "shed_classes": ["batch"]}) == {
        "cap_max_tokens": 256,
        "shed_classes": ["batch"],
    }
    held, events = degrade_changes({}, {"lanes": {"slow": idle}, "version": 4}, NOW)
    assert held == {} and events == []


def test_the_story_is_complete_when_the_first_of_each_kind_comes_in_order() -> None:
    story = [Event(NOW + i, kind) for i, kind in enumerate(KINDS)]
    assert story_complete(story)
    assert not story_complete(story[:-1])
    swapped = [story[0], story[2], story[1], *story[3:]]  # degrade before the alert
    assert not story_complete(swapped)
    extra = [*story[:3], Event(NOW + 2.5, "degrade_applied"), *story[3:]]  # an escalation step
    assert story_complete(extra)


def test_the_demo_and_the_report_share_one_list_of_event_kinds() -> None:
    from lanewatch.collector.demo.events import KINDS
    from lanewatch.exporters.report.data import EVENT_KINDS, SPAN_KINDS
    from lanewatch.exporters.report.render import ENDING_KINDS

    assert KINDS is EVENT_KINDS
    assert {k for span in SPAN_KINDS for k in span[1:]} == set(EVENT_KINDS)
    assert ENDING_KINDS == ("fault_cleared", "alert_resolved", "degrade_restored")
