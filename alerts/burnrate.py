"""SLO rules: SLI error ratios per window, meta recordings, and multi-window multi-burn-rate alerts.

The shape follows sloth (recording names `slo:sli_error:ratio_rate<window>`, meta
`slo:*`), with labels `lane` and `slo` instead of sloth's ids. Each step is a processor:
`(spec, groups) -> groups`, appending one group per SLO.
"""

from __future__ import annotations

import re

from lanewatch.exporters import names

from . import humanize, promql
from .duration import format_duration
from .model import DISPLAY, HISTOGRAMS, SLO, BurnPolicy, Spec, display_name
from .rulemodel import AlertText, Rule, RuleGroup, alert, extend, record


def windows(spec: Spec) -> list[int]:
    """Every window an SLI ratio is recorded over, shortest first."""
    return sorted({w for p in spec.burn for pair in p.pairs for w in (pair.long_s, pair.short_s)})


def ratio_name(window_s: int) -> str:
    """slo:sli_error:ratio_rate5m."""
    return f"{names.SLI_ERROR_RATIO}{format_duration(window_s)}"


def _group_name(slo: SLO) -> str:
    """One group per SLO: its alerts read its recordings in the same evaluation."""
    return f"{names.RULE_GROUP_PREFIX}-{slo.slug}"


def _ids(slo: SLO) -> dict[str, str]:
    return {names.LANE: slo.lane, names.SLO: slo.name}


def _own(metric: str, slo: SLO) -> str:
    """A recorded series of this SLO: metric{lane="…",slo="…"}."""
    return promql.selector(metric, promql.eq(_ids(slo).items()))


def error_ratio(slo: SLO, window_s: int) -> str:
    """Bad requests over all requests in a window; no sample while no request finished."""
    matchers = [(names.LANE, "=", slo.lane), *promql.eq(slo.selector)]
    if slo.metric is not None and slo.threshold_s is not None:
        histogram = HISTOGRAMS[slo.metric]
        good = promql.rate(
            f"{histogram}_bucket", [*matchers, ("le", "=", names.le(slo.threshold_s))], window_s
        )
        total = promql.rate(f"{histogram}_count", matchers, window_s)
        return f"1 - (\n  sum({good})\n  /\n  (sum({total}) > 0)\n)"
    # Availability reads the folded series too: a label set past the series budget keeps its lane
    # but its target, class and model become __overflow__, and its failures must still count.
    matchers = [(names.LANE, "=", slo.lane), *_or_folded(slo.selector)]
    errors = matchers
    if slo.exclude_error_kinds:
        errors = [*matchers, (names.ERROR_KIND, "!~", "|".join(slo.exclude_error_kinds))]
    bad = promql.rate(names.REQUEST_ERRORS_TOTAL, errors, window_s)
    total = promql.rate(names.REQUESTS_TOTAL, matchers, window_s)
    return f"(sum({bad}) or vector(0))\n/\n(sum({total}) > 0)"


def _or_folded(selector: tuple[tuple[str, str], ...]) -> list[promql.Matcher]:
    """Selector matchers that also take the overflow value of a label the series budget folds."""
    return [
        (k, "=~", f"{re.escape(v)}|{names.OVERFLOW_VALUE}") if k in _FOLDED else (k, "=", v)
        for k, v in selector
    ]


_FOLDED = frozenset({names.TARGET, names.REQUEST_CLASS, names.MODEL})


def sli_recordings(spec: Spec, groups: tuple[RuleGroup, ...]) -> tuple[RuleGroup, ...]:
    """Processor: each SLO's error ratio over every burn window, and its average over the period."""
    out = groups
    for slo in spec.slos:
        rules = [record(ratio_name(w), error_ratio(slo, w), **_ids(slo)) for w in windows(spec)]
        base = _own(ratio_name(windows(spec)[0]), slo)
        period = format_duration(spec.period_s)
        expr = f"sum_over_time({base}[{period}])\n/\ncount_over_time({base}[{period}])"
        rules.append(record(ratio_name(spec.period_s), expr, **_ids(slo)))
        out = extend(spec, out, _group_name(slo), rules)
    return out


def meta_recordings(spec: Spec, groups: tuple[RuleGroup, ...]) -> tuple[RuleGroup, ...]:
    """Processor: objective, budget, period, burn rates and budget left, per SLO."""
    out = groups
    for slo in spec.slos:
        ids = _ids(slo)
        budget = _own(names.ERROR_BUDGET_RATIO, slo)
        info = {
            **ids,
            "objective": promql.num(slo.objective),
            "metric": HISTOGRAMS[slo.metric] if slo.metric else names.REQUESTS_TOTAL,
            "threshold": promql.num(slo.threshold_s) if slo.threshold_s else "",
            "period": format_duration(spec.period_s),
            "spec": spec.name,
        }
        rules = [
            record(names.OBJECTIVE_RATIO, f"vector({promql.num(slo.objective)})", **ids),
            record(names.ERROR_BUDGET_RATIO, f"vector({promql.num(slo.error_budget)})", **ids),
            record(names.TIME_PERIOD_DAYS, f"vector({promql.num(spec.period_s / 86_400)})", **ids),
            record(
                names.CURRENT_BURN_RATE_RATIO,
                f"{_own(ratio_name(windows(spec)[0]), slo)}\n/ on (lane, slo)\n{budget}",
                **ids,
            ),
            record(
                names.PERIOD_BURN_RATE_RATIO,
                f"{_own(ratio_name(spec.period_s), slo)}\n/ on (lane, slo)\n{budget}",
                **ids,
            ),
            record(
                names.PERIOD_ERROR_BUDGET_REMAINING_RATIO,
                f"1 - {_own(names.PERIOD_BURN_RATE_RATIO, slo)}",
                **ids,
            ),
            record(names.SLO_INFO, "vector(1)", **{k: v for k, v in info.items() if v}),
        ]
        out = extend(spec, out, _group_name(slo), rules)
    return out


def burn_expr(slo: SLO, policy: BurnPolicy) -> str:
    """Pairs OR-ed; within a pair, both windows above factor × budget."""
    budget = promql.num(slo.error_budget)
    terms = []
    for pair in policy.pairs:
        limit = f"({promql.num(pair.factor)} * {budget})"
        long_ratio = _own(ratio_name(pair.long_s), slo)
        short_ratio = _own(ratio_name(pair.short_s), slo)
        terms.append(f"(\n  {long_ratio} > {limit}\n  and\n  {short_ratio} > {limit}\n)")
    return "\nor\n".join(terms)


def _goal(slo: SLO, spec: Spec) -> str:
    who = f"{humanize.percent(slo.objective)} of {slo.lane}-lane requests should"
    period = format_duration(spec.period_s)
    budget = humanize.percent(slo.error_budget)
    if slo.metric is not None and slo.threshold_s is not None:
        what = f"see {DISPLAY[slo.metric]} ≤ {humanize.seconds(slo.threshold_s)}"
    else:
        what = "succeed"
    return f"{who} {what} over {period} (error budget {budget})."


def _burn_text(slo: SLO, policy: BurnPolicy, spec: Spec) -> AlertText:
    slowest = min(pair.factor for pair in policy.pairs)
    pairs = ", or ".join(
        f"above {humanize.factor(p.factor)} the budget over both "
        f"{format_duration(p.long_s)} and {format_duration(p.short_s)}"
        for p in policy.pairs
    )
    lasts = humanize.about(spec.period_s / slowest)
    description = (
        f"{_goal(slo, spec)} The error ratio over the long window is "
        f"{{{{ $value | humanizePercentage }}}}: {pairs}. "
        f"At {humanize.factor(slowest)} the {format_duration(spec.period_s)} budget lasts about {lasts}."
    )
    if slo.description:
        description = f"{slo.description.strip()} {description}"
    summary = f"{slo.lane} lane {display_name(slo.name)} error budget burning over {humanize.factor(slowest)}"
    return AlertText(summary, description, names.DASHBOARD_OVERVIEW_UID, slo.lane)


def burn_alerts(spec: Spec, groups: tuple[RuleGroup, ...]) -> tuple[RuleGroup, ...]:
    """Processor: one alert per SLO and severity (page, ticket), named by the SLO."""
    out = groups
    for slo in spec.slos:
        rules: list[Rule] = [
            alert(
                spec,
                slo.alert_name,
                burn_expr(slo, policy),
                policy.for_s,
                policy.severity,
                _burn_text(slo, policy, spec),
                slo=slo.name,
            )
            for policy in spec.burn
        ]
        out = extend(spec, out, _group_name(slo), rules)
    return out
