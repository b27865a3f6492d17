"""Lane analysis in PromQL: P99 TTFT per lane, convergence ratios, mean E2E per class and its CV.

Recorded over the spec's analysis window under window-free names (names.LANE_*), so the
dashboards read the same series whichever spec produced them. CV is the population
standard deviation over the mean, as in collector/record/window.py.
"""

from __future__ import annotations

from lanewatch.exporters import names

from . import humanize, promql
from .duration import format_duration
from .model import Convergence, Spec
from .rulemodel import AlertText, Rule, RuleGroup, alert, extend, record

LANE_CLASS = (names.LANE, names.REQUEST_CLASS)
GROUP = f"{names.PREFIX}-lanes"  # recordings and the alerts that read them, evaluated in order


def _class_mean(window_s: int) -> str:
    total = promql.sum_by(LANE_CLASS, promql.rate(f"{names.E2E_SECONDS}_sum", (), window_s))
    count = promql.sum_by(LANE_CLASS, promql.rate(f"{names.E2E_SECONDS}_count", (), window_s))
    return f"{total}\n/\n({count} > 0)"


def _class_cv() -> str:
    mean = names.CLASS_E2E_MEAN
    return (
        f"stddev by (lane) ({mean})\n/\navg by (lane) ({mean})\nand on (lane)\ncount by (lane) ({mean}) >= 2"
    )


def _convergence_ratio(c: Convergence) -> str:
    fast = promql.selector(names.LANE_TTFT_P99, [(names.LANE, "=", c.fast)])
    slow = promql.selector(names.LANE_TTFT_P99, [(names.LANE, "=", c.slow)])
    return f"{fast}\n/ ignoring (lane)\n{slow}"


def lane_recordings(spec: Spec, groups: tuple[RuleGroup, ...]) -> tuple[RuleGroup, ...]:
    """Processor: the lane analysis series that convergence, flatness and the Lanes dashboard read."""
    window = spec.analysis_window_s
    rules = [
        record(
            names.LANE_TTFT_P99, promql.histogram_quantile(0.99, names.TTFT_SECONDS, (), [names.LANE], window)
        ),
        *(
            record(names.LANE_P99_CONVERGENCE_RATIO, _convergence_ratio(c), lane=c.fast, slow_lane=c.slow)
            for c in spec.convergence
        ),
        record(names.CLASS_E2E_MEAN, _class_mean(window)),
        record(names.LANE_FLATNESS_CV, _class_cv()),
    ]
    return extend(spec, groups, GROUP, rules)


def _convergence_alert(spec: Spec, c: Convergence) -> Rule:
    ratio = promql.selector(
        names.LANE_P99_CONVERGENCE_RATIO, [(names.LANE, "=", c.fast), (names.SLOW_LANE, "=", c.slow)]
    )
    text = AlertText(
        summary=f"{c.fast} lane is no faster than the {c.slow} lane",
        description=(
            f"P99 TTFT of the {c.fast} lane is {{{{ $value | humanizePercentage }}}} of the {c.slow} "
            f"lane's over the last {format_duration(spec.analysis_window_s)} "
            f"(alert at ≥ {humanize.percent(c.ratio)} "
            f"for {format_duration(c.for_s)}): routing to the {c.fast} lane no longer buys latency."
        ),
        dashboard_uid=names.DASHBOARD_LANES_UID,
        lane=c.fast,
    )
    expr = f"{ratio} >= {promql.num(c.ratio)}"
    name = f"{names.ALERT_PREFIX}LaneConvergence"
    return alert(spec, name, expr, c.for_s, c.severity, text, slo="convergence", slow_lane=c.slow)


def _flatness_alert(spec: Spec) -> Rule:
    f = spec.flatness
    assert f is not None
    window = spec.analysis_window_s
    traffic = promql.sum_by([names.LANE], promql.rate(f"{names.E2E_SECONDS}_count", (), window))
    expr = (
        f"{names.LANE_FLATNESS_CV} < {promql.num(f.max_cv)}\n"
        f"and on (lane)\ncount by (lane) ({names.CLASS_E2E_MEAN}) >= {f.min_classes}\n"
        f"and on (lane)\n{traffic} > {promql.num(f.min_rate)}"
    )
    text = AlertText(
        summary="{{ $labels.lane }} lane latency no longer depends on the work",
        description=(
            "The CV of mean E2E across request classes in the {{ $labels.lane }} lane is "
            '{{ printf "%.3f" $value }} '
            f"(alert below {promql.num(f.max_cv)} for {format_duration(f.for_s)}, with at least "
            f"{f.min_classes} classes and {promql.num(f.min_rate)} requests/s): "
            "a fixed cost such as queueing "
            "dominates every request, short or long."
        ),
        dashboard_uid=names.DASHBOARD_LANES_UID,
        lane=None,
    )
    return alert(spec, f"{names.ALERT_PREFIX}LatencyFlat", expr, f.for_s, f.severity, text, slo="flatness")


def lane_alerts(spec: Spec, groups: tuple[RuleGroup, ...]) -> tuple[RuleGroup, ...]:
    """Processor: convergence per declared lane pair, and flatness per lane."""
    rules = [_convergence_alert(spec, c) for c in spec.convergence]
    if spec.flatness is not None:
        rules.append(_flatness_alert(spec))
    return extend(spec, groups, GROUP, rules)
