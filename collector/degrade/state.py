"""The degrade controller's state: what each lane is told to do, and which alerts hold it there.

Pure data with a JSON codec (the store keeps the tracks as one JSON document and each alert
record as a row of its own) and the projection to the router's declarative degrade state
(the gateway admin API's body, docs/gateway.md; the model is collector/degrade_state/wire.py).
Times are Unix seconds, so a restarted controller keeps counting holds and cooldowns where it
stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from lanewatch.collector.degrade_state.wire import ACTIONS, ActionName, LaneDegrade, wire_body

__all__ = [
    "ACTIONS",
    "ActionName",
    "AlertRecord",
    "AuditEntry",
    "ControllerState",
    "LaneSpec",
    "Track",
    "TrackKind",
    "alert_from_json",
    "alert_to_json",
    "desired_state",
    "lanes_to_json",
    "state_from_json",
    "state_to_json",
]

TrackKind = Literal["shift", "protect"]
# One lane's degrade as the router sees it: the wire model the gateway's admin API speaks.
LaneSpec = LaneDegrade
STATE_FORMAT = 1


@dataclass(frozen=True)
class Track:
    """One degrade on one lane (a shift, or protection by cap and shed) and what holds it on."""

    lane: str
    kind: TrackKind
    step: int  # index into the policy's steps for this kind
    effect: LaneSpec  # what this step tells the router, fixed when the step was taken
    started_at: float
    stepped_at: float  # last change of step: the minimum hold and the escalation cooldown count from here
    firing: frozenset[str]  # fingerprints of the alerts keeping it on
    clear_since: float | None = None  # when `firing` last became empty


@dataclass(frozen=True)
class AlertRecord:
    """The last instance seen of an alert (by fingerprint): the replay and reordering guard."""

    status: Literal["firing", "resolved", "expired"]  # expired: firing, but not re-sent for too long
    starts_at: float
    seen_at: float  # the last notification that said so (a firing one refreshes it now and then)
    alertname: str
    lane: str | None = None  # the track it holds while firing
    kind: TrackKind | None = None


@dataclass(frozen=True)
class ControllerState:
    """Everything the controller decides from; replaced whole on each transition."""

    tracks: dict[tuple[str, TrackKind], Track] = field(default_factory=dict)
    alerts: dict[str, AlertRecord] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditEntry:
    """One line of the append-only audit log."""

    at: float
    event: (
        str  # apply | escalate | restore | fired | resolved | expired | resumed
        # | adapter_failed | adapter_ok | adapter_skipped (an action the adapter cannot take)
        # | diagnosis (why it acted: the lane's top findings from Prometheus, or why none)
        # | lead (one of a pair took the lead: its name, URL, term, the revision it starts from)
    )
    lane: str | None = None
    action: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def desired_state(state: ControllerState) -> dict[str, LaneSpec]:
    """The router degrade state the controller wants: each degraded lane's merged spec."""
    out: dict[str, LaneSpec] = {}
    for (lane, _kind), track in sorted(state.tracks.items()):
        out[lane] = out.get(lane, LaneSpec()).merge(track.effect)
    return {lane: spec for lane, spec in out.items() if spec.active()}


def lanes_to_json(lanes: dict[str, LaneSpec], revision: int | None = None) -> dict[str, Any]:
    """The body of `PUT /admin/degrade` for these lanes, with the state's revision when given."""
    return wire_body(lanes, revision)


def _alert_dict(a: AlertRecord) -> dict[str, Any]:
    return {
        "status": a.status,
        "starts_at": a.starts_at,
        "seen_at": a.seen_at,
        "alertname": a.alertname,
        "lane": a.lane,
        "kind": a.kind,
    }


def alert_to_json(record: AlertRecord) -> str:
    """One alert record as JSON (the store keeps one row per fingerprint)."""
    return json.dumps(_alert_dict(record), sort_keys=True)


def alert_from_json(text: str) -> AlertRecord:
    """Inverse of `alert_to_json`."""
    return AlertRecord(**json.loads(text))


def state_to_json(state: ControllerState) -> str:
    """Serialize the state (stable key order, so equal states give equal text)."""
    tracks = [
        {
            "lane": t.lane,
            "kind": t.kind,
            "step": t.step,
            "effect": t.effect.to_json(),
            "started_at": t.started_at,
            "stepped_at": t.stepped_at,
            "firing": sorted(t.firing),
            "clear_since": t.clear_since,
        }
        for _, t in sorted(state.tracks.items())
    ]
    alerts = {fp: _alert_dict(a) for fp, a in sorted(state.alerts.items())}
    return json.dumps({"format": STATE_FORMAT, "tracks": tracks, "alerts": alerts}, sort_keys=True)


def state_from_json(text: str) -> ControllerState:
    """Inverse of `state_to_json`; raises ValueError on another format."""
    data = json.loads(text)
    if data.get("format") != STATE_FORMAT:
        raise ValueError(f"unknown state format {data.get('format')!r} (expected {STATE_FORMAT})")
    tracks = {}
    for t in data["tracks"]:
        track = Track(
            lane=t["lane"],
            kind=t["kind"],
            step=int(t["step"]),
            effect=LaneSpec.from_json(t["effect"]),
            started_at=float(t["started_at"]),
            stepped_at=float(t["stepped_at"]),
            firing=frozenset(t["firing"]),
            clear_since=t["clear_since"],
        )
        tracks[(track.lane, track.kind)] = track
    alerts = {fp: AlertRecord(**a) for fp, a in data["alerts"].items()}
    return ControllerState(tracks=tracks, alerts=alerts)
