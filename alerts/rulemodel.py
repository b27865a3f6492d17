"""Rules and rule groups as frozen dataclasses, and the labels and annotations every alert carries."""

from __future__ import annotations

from dataclasses import dataclass

from lanewatch.exporters import names

from .model import Severity, Spec


@dataclass(frozen=True, slots=True)
class Rule:
    """A recording rule (`record`) or an alerting rule (`alert`)."""

    expr: str
    record: str | None = None
    alert: str | None = None
    for_s: int = 0
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RuleGroup:
    """A Prometheus rule group; its rules are evaluated in order."""

    name: str
    rules: tuple[Rule, ...]
    interval_s: int | None = None


def record(name: str, expr: str, **labels: str) -> Rule:
    """A recording rule with labels."""
    return Rule(expr=expr, record=name, labels=tuple(labels.items()))


@dataclass(frozen=True, slots=True)
class AlertText:
    """What an alert says and where it points; `lane` None means the series' own lane label."""

    summary: str
    description: str
    dashboard_uid: str
    lane: str | None


def alert(
    spec: Spec, name: str, expr: str, for_s: int, severity: Severity, text: AlertText, **labels: str
) -> Rule:
    """An alerting rule with severity, extra labels and the four standard annotations."""
    lane_var = text.lane if text.lane is not None else "{{ $labels.lane }}"
    dashboard = f"{spec.links.grafana}/d/{text.dashboard_uid}?var-lane={lane_var}"
    runbook = spec.links.runbook.format(alert=name, anchor=name.lower())
    all_labels = {names.SEVERITY: severity, **labels}
    if text.lane is not None:
        all_labels[names.LANE] = text.lane
    annotations = (
        ("summary", text.summary),
        ("description", text.description),
        ("runbook_url", runbook),
        ("dashboard_url", dashboard),
    )
    return Rule(
        expr=expr,
        alert=name,
        for_s=for_s,
        labels=tuple(sorted(all_labels.items())),
        annotations=annotations,
    )


def extend(spec: Spec, groups: tuple[RuleGroup, ...], name: str, rules: list[Rule]) -> tuple[RuleGroup, ...]:
    """Append rules to the group called `name`, or add that group (at the spec's interval) at the end.

    Rules that read another rule's output share its group: Prometheus evaluates a group's
    rules in order, but groups independently, so across groups a reader may see the
    previous evaluation's value.
    """
    if not rules:
        return groups
    for i, g in enumerate(groups):
        if g.name == name:
            merged = RuleGroup(name=name, rules=(*g.rules, *rules), interval_s=g.interval_s)
            return (*groups[:i], merged, *groups[i + 1 :])
    return (*groups, RuleGroup(name=name, rules=tuple(rules), interval_s=spec.evaluation_interval_s))
