"""Mitigation alerts: one per SLO, on the error ratio over one short window, for the degrade controller.

Paging alerts (burnrate.py) ask whether the error budget is at risk, over windows of an
hour and more; they are right for waking people and too slow to steer traffic. A
mitigation alert asks whether the lane is failing its SLO right now: most of its recent
requests missed (error ratio over `window` above `error_ratio`). It carries
`severity: mitigate` and `action: degrade`, and deploy/alertmanager routes that label to
the degrade controller alone, never to a pager. Its rules sit in a group of their own,
evaluated every `interval` whatever Prometheus' global evaluation interval, and compute
their ratios inline (no recording another group would read a whole interval late).
"""

from __future__ import annotations

from typing import Final

from lanewatch.exporters import names

from . import humanize, promql
from .burnrate import error_ratio
from .duration import format_duration
from .model import DISPLAY, SLO, Mitigation, Spec, display_name
from .rulemodel import AlertText, Rule, RuleGroup, alert

GROUP: Final = f"{names.PREFIX}-mitigation"


def alert_name(slo: SLO) -> str:
    """LanewatchTTFTMitigation: the SLO's display name and the suffix Mitigation."""
    return f"{names.ALERT_PREFIX}{display_name(slo.name)}Mitigation"


def mitigation_expr(slo: SLO, m: Mitigation) -> str:
    """The SLO's error ratio over the mitigation window above the mitigation threshold."""
    return f"(\n{error_ratio(slo, m.window_s)}\n) > {promql.num(m.error_ratio)}"


def _text(slo: SLO, m: Mitigation) -> AlertText:
    window = format_duration(m.window_s)
    share = humanize.percent(m.error_ratio)
    if slo.metric is not None and slo.threshold_s is not None:
        miss = f"missed {DISPLAY[slo.metric]} ≤ {humanize.seconds(slo.threshold_s)}"
    else:
        miss = "failed"
    description = (
        f"{{{{ $value | humanizePercentage }}}} of {slo.lane}-lane requests {miss} over the last {window} "
        f"(degrade above {share}). This alert reaches only the degrade controller, which shifts or "
        "protects the lane; the burn-rate alert of the same SLO decides whether to page."
    )
    verb = "failed" if slo.metric is None else "missed"
    summary = f"{slo.lane} lane {display_name(slo.name)}: over {share} of requests {verb} in {window}"
    return AlertText(summary, description, names.DASHBOARD_DEGRADE_UID, slo.lane)


def mitigation_alerts(spec: Spec, groups: tuple[RuleGroup, ...]) -> tuple[RuleGroup, ...]:
    """Processor: one mitigation alert per SLO, in their own group at the mitigation interval."""
    m = spec.mitigation
    if m is None or not spec.slos:
        return groups
    rules: list[Rule] = [
        alert(
            spec,
            alert_name(slo),
            mitigation_expr(slo, m),
            m.for_s,
            "mitigate",
            _text(slo, m),
            slo=slo.name,
            **{names.ACTION: names.ACTION_DEGRADE},
        )
        for slo in spec.slos
    ]
    return (*groups, RuleGroup(name=GROUP, rules=tuple(rules), interval_s=m.interval_s))
