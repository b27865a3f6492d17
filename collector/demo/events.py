"""The demo's story as events: faults, alerts and degrades, found by diffing what is watched.

Pure functions: `alert_changes` diffs Alertmanager's alert list (GET /api/v2/alerts) against
the alerts firing before, `degrade_changes` diffs the gateway's degrade state (GET
/admin/degrade) against the lanes degraded before. The watcher that polls both lives in
run.py; summary.json carries the events (`{"t": unix seconds, "kind": ..., details}`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lanewatch.exporters.report.data import EVENT_KINDS

__all__ = [
    "KINDS",
    "AlertKey",
    "Event",
    "alert_changes",
    "controller_alerts",
    "degrade_changes",
    "lane_actions",
    "story_complete",
]

# The event kinds, in the order a healthy loop emits them: the report draws the same ones.
KINDS = EVENT_KINDS
AlertKey = tuple[str, str, str, str, str]  # (alertname, lane, severity, slo, source)
CONVERGENCE_ALERT = "LanewatchLaneConvergence"


@dataclass(frozen=True)
class Event:
    """Something that happened, at Unix time `t`."""

    t: float
    kind: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The summary.json form: t, kind, then the details."""
        return {"t": round(self.t, 3), "kind": self.kind, **self.details}


def _parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _key(labels: Mapping[str, str]) -> AlertKey:
    return (
        labels.get("alertname", ""),
        labels.get("lane", ""),
        labels.get("severity", ""),
        labels.get("slo", ""),
        labels.get("source", "rules"),  # the fast guard's alerts say source="guard"
    )


def controller_alerts(alerts: Iterable[Mapping[str, Any]], now: float) -> dict[AlertKey, Mapping[str, Any]]:
    """Alerts firing now that Alertmanager routes to the degrade controller (pages, convergence, and
    mitigation alerts: the rules' and the fast guard's)."""
    out: dict[AlertKey, Mapping[str, Any]] = {}
    for alert in alerts:
        labels = alert.get("labels") or {}
        name = labels.get("alertname", "")
        if not name.startswith("Lanewatch"):
            continue
        controller = labels.get("severity") == "page" or labels.get("action") == "degrade"
        if not controller and name != CONVERGENCE_ALERT:
            continue
        state = (alert.get("status") or {}).get("state")
        ends = _parse_time(alert.get("endsAt"))
        if state in ("active", "suppressed") and (ends is None or ends > now):
            out[_key(labels)] = alert
    return out


def alert_changes(
    before: set[AlertKey], alerts: Iterable[Mapping[str, Any]], now: float
) -> tuple[set[AlertKey], list[Event]]:
    """The controller-bound alerts firing now, and an event for each that started or ended."""
    firing = controller_alerts(alerts, now)
    events = []
    for key in sorted(set(firing) - before):
        name, lane, severity, slo, source = key
        starts = _parse_time(firing[key].get("startsAt"))
        details = {"alertname": name, "lane": lane, "severity": severity, "slo": slo, "source": source}
        events.append(Event(now, "alert_firing", {**details, "starts_at": starts}))
    for key in sorted(before - set(firing)):
        name, lane, severity, slo, source = key
        details = {"alertname": name, "lane": lane, "severity": severity, "slo": slo, "source": source}
        events.append(Event(now, "alert_resolved", details))
    return set(firing), events


def lane_actions(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The degrade actions in one lane's state that are on (shift, cap, shed); empty when none."""
    on: dict[str, Any] = {}
    if spec.get("shift_to") and (spec.get("shift_percent") or 0) > 0:
        on["shift_to"] = spec["shift_to"]
        on["shift_percent"] = spec["shift_percent"]
    if spec.get("cap_max_tokens"):
        on["cap_max_tokens"] = spec["cap_max_tokens"]
    if spec.get("shed_classes"):
        on["shed_classes"] = list(spec["shed_classes"])
    return on


def degrade_changes(
    before: Mapping[str, Mapping[str, Any]], state: Mapping[str, Any], now: float
) -> tuple[dict[str, dict[str, Any]], list[Event]]:
    """Lanes degraded in the gateway's state now, and an event for each lane applied, changed or restored."""
    lanes = state.get("lanes") or {}
    current = {lane: on for lane, spec in lanes.items() if (on := lane_actions(spec or {}))}
    version = state.get("version")
    events = [
        Event(now, "degrade_applied", {"lane": lane, **on, "version": version})
        for lane, on in sorted(current.items())
        if before.get(lane) != on
    ]
    events += [
        Event(now, "degrade_restored", {"lane": lane, "version": version})
        for lane in sorted(set(before) - set(current))
    ]
    return current, events


def story_complete(events: Iterable[Event]) -> bool:
    """True once each of the six kinds happened, the first of each after the first of the one before."""
    first: dict[str, int] = {}
    for i, e in enumerate(events):
        first.setdefault(e.kind, i)
    if any(kind not in first for kind in KINDS):
        return False
    order = [first[kind] for kind in KINDS]
    return order == sorted(order)
