"""The guard's alert as Alertmanager's API takes it (`POST /api/v2/alerts`, a list of postable alerts).

Its labels are the generated mitigation alert's (alertname, lane, slo, severity, action) plus
`source="guard"`: the same route, policy, silences and inhibitions apply, and Alertmanager keeps
it apart from the rule's own alert of the same name, so either can hold a degrade and neither
resolves the other. While firing it is re-sent with an `endsAt` a few re-sends ahead, so a guard
that dies lets its alert lapse instead of holding a degrade for ever; resolved, it is sent once
more with `endsAt` now. Its `startsAt` is its first miss in the fire window, a second or more
before it fired: Alertmanager flushes a new group at once for an alert that started more than
`group_wait` ago, rather than waiting `group_wait` again. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["GUARD_SOURCE", "GuardAlert", "postable"]

GUARD_SOURCE = "guard"  # the `source` label, and the audit's name for who fired


@dataclass(frozen=True, slots=True)
class GuardAlert:
    """What one lane SLO's alert says: labels and annotations, from the generated rule."""

    lane: str
    slo: str
    threshold_s: float
    labels: tuple[tuple[str, str], ...]  # the rule's, alertname included
    annotations: tuple[tuple[str, str], ...]


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def postable(
    alert: GuardAlert, starts_at: float, ends_at: float, judged: int, missed: int, generator_url: str
) -> dict[str, Any]:
    """One postable alert (Unix times); the counts that decided go in its description."""
    annotations = dict(alert.annotations)
    annotations["summary"] = (
        f"{alert.lane} lane {alert.slo}: {missed} of {judged} recent requests missed "
        f"{alert.threshold_s:g}s (fast guard)"
    )
    annotations["description"] = (
        f"The fast guard saw {missed} of the last {judged} judged {alert.lane}-lane requests miss "
        f"TTFT ≤ {alert.threshold_s:g}s, counting each at its first token or once it waited past the "
        "threshold. This alert reaches only the degrade controller."
    )
    return {
        "labels": {**dict(alert.labels), "source": GUARD_SOURCE},
        "annotations": annotations,
        "startsAt": _iso(starts_at),
        "endsAt": _iso(ends_at),
        "generatorURL": generator_url,
    }
