"""The pure decisions: (policy, state, notification or tick, now) → (new state, actions).

No I/O and no clock: `now` is passed in (Unix seconds). A notification attaches firing alerts
to tracks and detaches resolved ones; a tick takes the time-driven steps (escalation after the
cooldown while firing, recovery after the stable period and the hold, and the expiry of firing
alerts that Alertmanager stopped re-sending). Each alert instance is
known by (fingerprint, startsAt): a replayed or out-of-order notification finds its instance
already recorded and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .policy import Policy
from .state import ACTIONS, ActionName, AlertRecord, AuditEntry, ControllerState, LaneSpec, Track, TrackKind
from .webhook import Alert, Notification

__all__ = [
    "FUTURE_TOLERANCE_S",
    "Action",
    "Decision",
    "Outcome",
    "classify",
    "on_notification",
    "on_tick",
    "step_effect",
]

Direction = Literal["apply", "escalate", "restore"]
# What became of one alert in a notification.
Outcome = Literal[
    "fired", "joined", "resolved", "recorded", "duplicate", "stale", "ignored", "expired", "future"
]
# How far an alert's startsAt may lie ahead of the controller's clock (skew between hosts).
# An instance from further ahead is refused: every real later instance of the alert, and its
# resolution, would look older than it and be dropped as stale, pinning the degrade on.
FUTURE_TOLERANCE_S = 300.0


@dataclass(frozen=True)
class Action:
    """One change of one router action on one lane."""

    lane: str
    action: ActionName
    direction: Direction
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """The new state, the router changes it implies, and what goes into the audit log."""

    state: ControllerState
    actions: tuple[Action, ...] = ()
    audit: tuple[AuditEntry, ...] = ()
    outcomes: tuple[Outcome, ...] = ()


class _Work:
    """A mutable copy of the state that one decision builds up."""

    def __init__(self, state: ControllerState, now: float) -> None:
        self.now = now
        self.tracks = dict(state.tracks)
        self.alerts = dict(state.alerts)
        self.actions: list[Action] = []
        self.audit: list[AuditEntry] = []
        # Firing sets this decision changes, as mutable copies frozen into the tracks at the
        # end: a notification of thousands of alerts on one track then costs O(alerts), not
        # a new frozenset per alert (O(alerts²)).
        self._firing: dict[tuple[str, TrackKind], set[str]] = {}

    def firing_now(self, key: tuple[str, TrackKind]) -> AbstractSet[str]:
        """The alerts holding a track at this point of the decision (read only)."""
        return self._firing.get(key, self.tracks[key].firing)

    def firing(self, key: tuple[str, TrackKind]) -> set[str]:
        """The alerts holding a track, to change in place; copied once per decision."""
        fps = self._firing.get(key)
        if fps is None:
            fps = self._firing[key] = set(self.tracks[key].firing)
        return fps

    def change(self, lane: str, old: LaneSpec, new: LaneSpec, why: dict[str, Any]) -> None:
        for action in _transitions(lane, old, new, why):
            self.actions.append(action)
            self.audit.append(AuditEntry(self.now, action.direction, lane, action.action, action.detail))

    def note(self, event: str, lane: str | None, detail: dict[str, Any]) -> None:
        self.audit.append(AuditEntry(self.now, event, lane, None, detail))

    def decision(self, outcomes: tuple[Outcome, ...] = ()) -> Decision:
        for key, fps in self._firing.items():
            track = self.tracks.get(key)
            if track is not None:
                self.tracks[key] = replace(track, firing=frozenset(fps))
        state = ControllerState(tracks=self.tracks, alerts=self.alerts)
        return Decision(state, tuple(self.actions), tuple(self.audit), outcomes)


def classify(policy: Policy, labels: Mapping[str, str]) -> tuple[str, TrackKind] | str:
    """The (lane, kind of degrade) an alert asks for, or why the policy ignores it."""
    name = labels.get("alertname", "")
    if not name.startswith(policy.alertname_prefix):
        return f"alertname does not start with {policy.alertname_prefix!r}"
    if policy.severities and labels.get("severity") not in policy.severities:
        return "severity not acted on"
    lane = labels.get("lane")
    if lane is None:
        return "no lane label"
    if lane not in policy.lane_order:
        return "lane not in the policy's lane_order"
    if name in policy.convergence_alerts or policy.faster_lane(lane) is None:
        return (lane, "protect")
    return (lane, "shift")


def on_notification(policy: Policy, state: ControllerState, n: Notification, now: float) -> Decision:
    """Apply one Alertmanager notification: attach firing alerts, detach resolved ones."""
    work = _Work(state, now)
    outcomes = tuple(_on_alert(policy, work, alert) for alert in n.alerts)
    return work.decision(outcomes)


def on_tick(policy: Policy, state: ControllerState, now: float) -> Decision:
    """Take the steps that time allows: expire silent alerts, escalate, recover once stable and held."""
    work = _Work(state, now)
    expired = _expire_silent(policy, work)
    for key, track in sorted(work.tracks.items()):
        if work.firing_now(key):
            _maybe_escalate(policy, work, track)
        elif _recovered(policy, track, now):
            del work.tracks[key]
            work.change(track.lane, track.effect, LaneSpec(), {"kind": track.kind, "reason": "recovered"})
    for fp, rec in state.alerts.items():
        if rec.status != "firing" and now - rec.seen_at > policy.alert_retention_s:
            del work.alerts[fp]
    outcome: Outcome = "expired"
    return work.decision((outcome,) * expired)


def _expire_silent(policy: Policy, work: _Work) -> int:
    """Let go of firing alerts that Alertmanager has not re-sent for `firing_stale_after_s`."""
    after = policy.firing_stale_after_s
    if after is None:
        return 0
    silent = [
        (fp, rec)
        for fp, rec in work.alerts.items()
        if rec.status == "firing" and work.now - rec.seen_at > after
    ]
    for fp, rec in silent:
        _detach(work, fp, rec, "expired", silent_s=round(work.now - rec.seen_at))
        work.alerts[fp] = replace(rec, status="expired")
    return len(silent)


def _on_alert(policy: Policy, work: _Work, alert: Alert) -> Outcome:
    fp = alert.fingerprint
    starts = alert.starts_at.timestamp()
    if starts > work.now + FUTURE_TOLERANCE_S:
        return "future"
    rec = work.alerts.get(fp)
    if rec is not None and starts < rec.starts_at:
        return "stale"  # an older instance than one already seen
    if rec is not None and starts == rec.starts_at:
        if rec.status == alert.status:
            if rec.status == "firing" and _refresh_due(policy, rec, work.now):
                work.alerts[fp] = replace(rec, seen_at=work.now)  # Alertmanager's repeat: still firing
            return "duplicate"
        if rec.status == "resolved":
            return "stale"  # this instance's firing arrived after its resolution
    if rec is not None and rec.status == "firing":
        _detach(work, fp, rec, "resolved")  # resolved, or superseded by a newer instance
    target = classify(policy, alert.labels)
    name = alert.labels.get("alertname", "")
    if alert.status == "resolved":
        if rec is None and isinstance(target, str):
            return "ignored"
        work.alerts[fp] = AlertRecord("resolved", starts, work.now, name)
        return "resolved" if rec is not None and rec.status == "firing" else "recorded"
    if isinstance(target, str):
        work.alerts.pop(fp, None)
        return "ignored"
    lane, kind = target
    work.alerts[fp] = AlertRecord("firing", starts, work.now, name, lane, kind)
    return _attach(policy, work, alert, lane, kind)


def _attach(policy: Policy, work: _Work, alert: Alert, lane: str, kind: TrackKind) -> Outcome:
    fp = alert.fingerprint
    # `source`: who fired it; the fast guard labels its alerts source="guard", the rules do not
    source = alert.labels.get("source", "rules")
    why = {"kind": kind, "alertname": alert.labels.get("alertname"), "source": source, "fingerprint": fp}
    work.note("fired", lane, why)
    track = work.tracks.get((lane, kind))
    if track is not None:
        work.firing((lane, kind)).add(fp)
        if track.clear_since is not None:
            work.tracks[(lane, kind)] = replace(track, clear_since=None)
        return "joined"
    effect = step_effect(policy, kind, lane, 0)
    now = work.now
    work.tracks[(lane, kind)] = Track(lane, kind, 0, effect, now, now, frozenset({fp}))
    work.change(lane, LaneSpec(), effect, {**why, "step": 0})
    return "fired"


def _refresh_due(policy: Policy, rec: AlertRecord, now: float) -> bool:
    """Whether a repeat of a firing alert should move its seen_at (coarsely: few store commits)."""
    after = policy.firing_stale_after_s
    return after is not None and now - rec.seen_at >= after / 10


def _detach(work: _Work, fp: str, rec: AlertRecord, event: str, **extra: Any) -> None:
    if rec.lane is None or rec.kind is None:
        return
    key = (rec.lane, rec.kind)
    track = work.tracks.get(key)
    if track is None or fp not in work.firing_now(key):
        return
    firing = work.firing(key)
    firing.discard(fp)
    if not firing and track.clear_since is None:
        work.tracks[key] = replace(track, clear_since=work.now)
    work.note(event, rec.lane, {"kind": rec.kind, "alertname": rec.alertname, "fingerprint": fp, **extra})


def _maybe_escalate(policy: Policy, work: _Work, track: Track) -> None:
    steps = len(policy.shift_percents) if track.kind == "shift" else len(policy.protect_steps)
    if track.step + 1 >= steps or work.now - track.stepped_at < policy.escalation_cooldown_s:
        return
    step = track.step + 1
    effect = step_effect(policy, track.kind, track.lane, step, shift_to=track.effect.shift_to)
    work.tracks[(track.lane, track.kind)] = replace(track, step=step, effect=effect, stepped_at=work.now)
    work.change(
        track.lane, track.effect, effect, {"kind": track.kind, "step": step, "reason": "still firing"}
    )


def _recovered(policy: Policy, track: Track, now: float) -> bool:
    if track.clear_since is None:
        return False
    stable = now - track.clear_since >= policy.recovery_stable_s
    return stable and now - track.stepped_at >= policy.min_hold_s


def step_effect(
    policy: Policy, kind: TrackKind, lane: str, step: int, shift_to: str | None = None
) -> LaneSpec:
    """What step `step` of a `kind` degrade on `lane` tells the router."""
    if kind == "shift":
        return LaneSpec(
            shift_to=shift_to or policy.faster_lane(lane), shift_percent=policy.shift_percents[step]
        )
    p = policy.protect_steps[step]
    return LaneSpec(cap_max_tokens=p.cap_max_tokens, shed_classes=p.shed_classes)


def _transitions(lane: str, old: LaneSpec, new: LaneSpec, why: dict[str, Any]) -> list[Action]:
    before, after = set(old.active()), set(new.active())
    out = []
    for a in ACTIONS:
        if a in after:
            value = _value(new, a)
            if a not in before:
                out.append(Action(lane, a, "apply", {**why, **value}))
            elif value != _value(old, a):
                out.append(Action(lane, a, "escalate", {**why, **value}))
        elif a in before:
            out.append(Action(lane, a, "restore", {**why, **_value(old, a)}))
    return out


def _value(spec: LaneSpec, action: ActionName) -> dict[str, Any]:
    if action == "shift":
        return {"to": spec.shift_to, "percent": spec.shift_percent}
    if action == "cap_max_tokens":
        return {"cap_max_tokens": spec.cap_max_tokens}
    return {"classes": list(spec.shed_classes)}
