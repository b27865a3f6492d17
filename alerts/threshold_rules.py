"""Threshold alerts: latency quantiles per lane, probe failures, scrape failures, vLLM saturation."""

from __future__ import annotations

from collections.abc import Callable

from lanewatch.exporters import names

from . import humanize, promql
from .duration import format_duration
from .model import DISPLAY, HISTOGRAMS, Check, QuantileAlert, Spec
from .rulemodel import AlertText, Rule, RuleGroup, alert, extend

PREFIX = names.ALERT_PREFIX
VLLM_BY = ("lane", "instance", "model_name")
ON_INSTANCE = "On {{ $labels.instance }} ({{ $labels.lane }} lane, model {{ $labels.model_name }}): "


def quantile_label(q: float) -> str:
    """0.99 -> "P99", 0.999 -> "P999", 0.5 -> "P50"."""
    return "P" + promql.num(round(q * 100, 6)).replace(".", "")


def quantile_alert_name(a: QuantileAlert) -> str:
    """LanewatchTTFTP99High."""
    return f"{PREFIX}{DISPLAY[a.metric]}{quantile_label(a.quantile)}High"


def _quantile(spec: Spec, a: QuantileAlert) -> Rule:
    q = quantile_label(a.quantile)
    window = format_duration(spec.analysis_window_s)
    expr = promql.histogram_quantile(
        a.quantile, HISTOGRAMS[a.metric], [(names.LANE, "=", a.lane)], (), spec.analysis_window_s
    )
    limit = humanize.seconds(a.limit_s)
    text = AlertText(
        summary=f"{a.lane} lane {q} {DISPLAY[a.metric]} above {limit}",
        description=(
            f"{q} {DISPLAY[a.metric]} of {a.lane}-lane requests is {{{{ $value | humanizeDuration }}}} "
            f"over the last {window}, above the {limit} limit for {format_duration(a.for_s)}."
        ),
        dashboard_uid=names.DASHBOARD_LATENCY_UID,
        lane=a.lane,
    )
    return alert(
        spec,
        quantile_alert_name(a),
        f"{expr} > {promql.num(a.limit_s)}",
        a.for_s,
        a.severity,
        text,
        slo=a.metric,
    )


def _probe_failures(spec: Spec, c: Check) -> Rule:
    by = (names.TARGET, names.LANE)
    probe = [(names.SOURCE, "=", "probe")]
    errors = promql.sum_by(by, promql.rate(names.REQUEST_ERRORS_TOTAL, probe, spec.analysis_window_s))
    total = promql.sum_by(by, promql.rate(names.REQUESTS_TOTAL, probe, spec.analysis_window_s))
    text = AlertText(
        summary="Probes of target {{ $labels.target }} ({{ $labels.lane }} lane) are failing",
        description=(
            "{{ $value | humanizePercentage }} of synthetic probes to {{ $labels.target }} "
            "failed over the last "
            f"{format_duration(spec.analysis_window_s)} (limit {humanize.percent(c.above)})."
        ),
        dashboard_uid=names.DASHBOARD_OVERVIEW_UID,
        lane=None,
    )
    expr = f"{errors}\n/\n{total}\n> {promql.num(c.above)}"
    return alert(spec, f"{PREFIX}ProbeFailures", expr, c.for_s, c.severity, text, slo="availability")


def _target_down(spec: Spec) -> list[Rule]:
    rules = []
    if spec.target_down:
        d = spec.target_down
        text = AlertText(
            summary="lanewatch cannot scrape vLLM metrics of target {{ $labels.target }}",
            description=(
                "The collector's scrape of {{ $labels.target }} ({{ $labels.lane }} lane) /metrics "
                "has failed "
                f"for {format_duration(d.for_s)}: the server is down or unreachable."
            ),
            dashboard_uid=names.DASHBOARD_SERVER_UID,
            lane=None,
        )
        expr = f"{promql.aggregate('max', (names.TARGET, names.LANE), names.SCRAPE_UP)} == 0"
        rules.append(alert(spec, f"{PREFIX}TargetDown", expr, d.for_s, d.severity, text, slo="availability"))
    if spec.component_down:
        d = spec.component_down
        text = AlertText(
            summary="Prometheus cannot scrape {{ $labels.job }} at {{ $labels.instance }}",
            description=(
                f"The scrape of {{{{ $labels.instance }}}} (job {{{{ $labels.job }}}}) has failed for "
                f"{format_duration(d.for_s)}: its metrics, and the alerts built on them, are blind."
            ),
            dashboard_uid=names.DASHBOARD_SERVER_UID,
            lane=None,
        )
        expr = f"{promql.selector('up', [('job', '=~', d.jobs)])} == 0"
        rules.append(alert(spec, f"{PREFIX}ComponentDown", expr, d.for_s, d.severity, text, slo="monitoring"))
    if spec.controller_no_leader:
        d = spec.controller_no_leader
        text = AlertText(
            summary="No degrade controller leads",
            description=(
                f"No lanewatch degrade controller has led for {format_duration(d.for_s)}: alerts reach "
                "nobody who acts, no lane degrades or restores, and the routers keep the state they hold."
            ),
            dashboard_uid=names.DASHBOARD_DEGRADE_UID,
            lane=None,
        )
        # every controller down leaves no series at all: `or vector(0)` makes that a 0 too
        expr = f"(max({names.DEGRADE_LEADER}) or vector(0)) < 1"
        name = f"{PREFIX}DegradeNoLeader"
        rules.append(alert(spec, name, expr, d.for_s, d.severity, text, slo="monitoring"))
    if spec.router_unsynced:
        d = spec.router_unsynced
        text = AlertText(
            summary="Router {{ $labels.adapter }} does not hold the degrade controller's state",
            description=(
                "The leading degrade controller's applies to {{ $labels.adapter }} have not succeeded "
                f"for {format_duration(d.for_s)}: that router keeps an older state, and no degrade or "
                "restore reaches it."
            ),
            dashboard_uid=names.DASHBOARD_DEGRADE_UID,
            lane=None,
        )
        # only the leader exports it: a standby's absence is no failure, nobody leading is NoLeader's
        expr = f"max by ({names.ADAPTER}) ({names.DEGRADE_ADAPTER_SYNCED}) == 0"
        name = f"{PREFIX}DegradeRouterUnsynced"
        rules.append(alert(spec, name, expr, d.for_s, d.severity, text, slo="monitoring"))
    return rules


def _vllm(metric: str, expr: Callable[[str], str]) -> str:
    """`expr` over a vLLM family under its current name or any older one (renamed across versions)."""
    return promql.either(names.vllm_family_names(metric), expr)


def _saturation(spec: Spec) -> list[Rule]:
    window = spec.analysis_window_s
    checks = [
        (
            spec.waiting_requests,
            "VLLMRequestsWaiting",
            promql.sum_by(VLLM_BY, names.VLLM_NUM_REQUESTS_WAITING),
            "{{ $value }} requests wait for a batch slot on {{ $labels.instance }}",
            "more than {limit} requests waiting for {for_}; "
            "the server is at capacity, so queue time adds to TTFT",
        ),
        (
            spec.kv_cache_usage,
            "VLLMKVCacheFull",
            promql.aggregate("max", VLLM_BY, _vllm(names.VLLM_KV_CACHE_USAGE_PERC, lambda name: name)),
            "KV cache {{ $value | humanizePercentage }} full on {{ $labels.instance }}",
            "KV-cache usage above {limit} for {for_}; new requests wait and running ones may be preempted",
        ),
        (
            spec.preemptions,
            "VLLMPreemptions",
            promql.sum_by(
                VLLM_BY, _vllm(names.VLLM_NUM_PREEMPTIONS_TOTAL, lambda name: promql.rate(name, (), window))
            ),
            'vLLM on {{ $labels.instance }} preempts {{ printf "%.2f" $value }} requests/s',
            "preemptions above {limit}/s for {for_}; "
            "preempted requests recompute their KV cache, so latency jumps",
        ),
    ]
    rules = []
    for check, name, expr, summary, detail in checks:
        if check is None:
            continue
        limit = humanize.percent(check.above) if name == "VLLMKVCacheFull" else promql.num(check.above)
        text = AlertText(
            summary=summary,
            description=ON_INSTANCE + detail.format(limit=limit, for_=format_duration(check.for_s)) + ".",
            dashboard_uid=names.DASHBOARD_SERVER_UID,
            lane=None,
        )
        full = f"{expr} > {promql.num(check.above)}"
        rules.append(
            alert(spec, f"{PREFIX}{name}", full, check.for_s, check.severity, text, slo="saturation")
        )
    return rules


def _series_overflow(spec: Spec) -> Rule:
    """Always on: a folded series hides its target, class and model, and the budget is spent for good."""
    window = spec.analysis_window_s
    expr = promql.sum_by(
        (names.FAMILY,), f"increase({names.SERIES_OVERFLOW_TOTAL}[{format_duration(window)}])"
    )
    text = AlertText(
        summary="Series of {{ $labels.family }} are folding into __overflow__",
        description=(
            "Observations of {{ $labels.family }} went to the __overflow__ label set over the last "
            f"{format_duration(window)}: the series budget (export.max_series, "
            "export.max_series_per_family) is spent, so new targets, request classes or models lose "
            "their own series. Lanes never fold, so the SLO alerts still see every lane."
        ),
        dashboard_uid=names.DASHBOARD_OVERVIEW_UID,
        lane=None,
    )
    return alert(spec, f"{PREFIX}SeriesOverflow", f"{expr} > 0", 0, "ticket", text, slo="cardinality")


def threshold_alerts(spec: Spec, groups: tuple[RuleGroup, ...]) -> tuple[RuleGroup, ...]:
    """Processor: the latency, probe, scrape and saturation alerts the spec turns on."""
    latency = [_quantile(spec, a) for a in spec.latency_alerts]
    health = [_probe_failures(spec, spec.probe_failures)] if spec.probe_failures else []
    health += _target_down(spec)
    health.append(_series_overflow(spec))
    groups = extend(spec, groups, f"{names.PREFIX}-latency-alerts", latency)
    groups = extend(spec, groups, f"{names.PREFIX}-health-alerts", health)
    return extend(spec, groups, f"{names.PREFIX}-saturation-alerts", _saturation(spec))
