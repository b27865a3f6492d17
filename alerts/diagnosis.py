"""The diagnosis's signals per lane as recording rules, each beside its threshold: one definition.

`lanewatch diagnose` holds each signal against a threshold of collector/diagnose/thresholds.py;
these rules record the same signals per lane over the spec's analysis window
(names.DIAGNOSE_SIGNAL, label `signal` = the threshold's name) and each threshold's value from
the same definitions (names.DIAGNOSE_THRESHOLD), so the Lanes dashboard draws every signal
against the limit the diagnosis uses. The diagnosis itself (which check explains most) stays
`lanewatch diagnose`'s: a panel shows the evidence, not the verdict.
"""

from __future__ import annotations

from collections.abc import Callable

from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from lanewatch.exporters import names

from . import promql
from .duration import format_duration
from .model import Spec
from .rulemodel import Rule, RuleGroup, extend, record

GROUP = f"{names.PREFIX}-diagnosis"
BY = (names.LANE,)


def _mean_part(phase: str, window_s: int) -> str:
    """Mean seconds of one breakdown part per record (every record with a breakdown has decode)."""
    part = promql.sum_by(BY, promql.rate(f"{names.PHASE_SECONDS}_sum", [(names.PHASE, "=", phase)], window_s))
    n = promql.sum_by(
        BY, promql.rate(f"{names.PHASE_SECONDS}_count", [(names.PHASE, "=", "decode")], window_s)
    )
    return f"({part} / ({n} > 0))"


def _mean_ttft(window_s: int) -> str:
    total = promql.sum_by(BY, promql.rate(f"{names.TTFT_SECONDS}_sum", (), window_s))
    count = promql.sum_by(BY, promql.rate(f"{names.TTFT_SECONDS}_count", (), window_s))
    return f"({total} / ({count} > 0))"


def _share(phase: str) -> Callable[[int], str]:
    return lambda w: f"{_mean_part(phase, w)}\n/\n({_mean_ttft(w)} > 0)"


def _vllm_gauge(family: str, op: str) -> Callable[[int], str]:
    window = format_duration
    return lambda w: promql.either(
        names.vllm_family_names(family),
        lambda name: promql.aggregate(op, BY, f"avg_over_time({name}[{window(w)}])"),
    )


def _vllm_rate(family: str) -> Callable[[int], str]:
    return lambda w: promql.either(
        names.vllm_family_names(family), lambda name: promql.sum_by(BY, promql.rate(name, (), w))
    )


def _hit_rate(w: int) -> str:
    hits = _vllm_rate(names.VLLM_PREFIX_CACHE_HITS_TOTAL)(w)
    queries = _vllm_rate(names.VLLM_PREFIX_CACHE_QUERIES_TOTAL)(w)
    return f"{hits}\n/\n({queries} > 0)"


def _error_share(w: int) -> str:
    # client_disconnect left out, as the diagnosis and the availability SLO do
    failed = promql.rate(names.REQUEST_ERRORS_TOTAL, [(names.ERROR_KIND, "!=", "client_disconnect")], w)
    total = promql.sum_by(BY, promql.rate(names.REQUESTS_TOTAL, (), w))
    return f"(sum by (lane) ({failed}) or {total} * 0)\n/\n({total} > 0)"


# (threshold name, the signal it is held to per lane, over the window)
SIGNALS: tuple[tuple[str, Callable[[int], str]], ...] = (
    ("queue_share", _share("queue")),
    ("prefill_share", _share("prefill")),
    ("waiting_above", _vllm_gauge(names.VLLM_NUM_REQUESTS_WAITING, "sum")),
    ("kv_usage", _vllm_gauge(names.VLLM_KV_CACHE_USAGE_PERC, "max")),
    ("preemptions_per_s", _vllm_rate(names.VLLM_NUM_PREEMPTIONS_TOTAL)),
    ("prefix_hit_rate", _hit_rate),
    ("error_share", _error_share),
)


def signal_rules(window_s: int, t: Thresholds = DEFAULT_THRESHOLDS) -> list[Rule]:
    """Each signal per lane and its threshold's value, from the diagnosis's own thresholds."""
    rules = []
    for name, expr in SIGNALS:
        label = {names.DIAGNOSE_SIGNAL_LABEL: name}
        rules.append(record(names.DIAGNOSE_SIGNAL, expr(window_s), **label))
        rules.append(
            record(names.DIAGNOSE_THRESHOLD, f"vector({promql.num(float(getattr(t, name)))})", **label)
        )
    return rules


def diagnosis_recordings(spec: Spec, groups: tuple[RuleGroup, ...]) -> tuple[RuleGroup, ...]:
    """Processor: the diagnosis's signals per lane beside their thresholds, in a group of their own."""
    return extend(spec, groups, GROUP, signal_rules(spec.analysis_window_s))
