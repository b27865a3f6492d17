"""Goodput recordings: the share of requests that met every latency SLO and did not fail.

The collector judges each request against the spec's latency SLOs of the lane it was routed
to (collector/record/goodput.py) and counts it in `lanewatch_goodput_requests_total` by outcome
(met, missed, failed). Requests the gateway shed never reach a record, so its shed counter
joins the denominator as misses (as user traffic: source="tap"). Recorded per lane, request
class and source, and per lane and source, over the spec's analysis window, under
window-free names (names.GOODPUT_RATIO, names.LANE_GOODPUT_RATIO) that the dashboards read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from lanewatch.exporters import names

from . import promql
from .model import Spec
from .rulemodel import RuleGroup, extend, record

GROUP: Final = f"{names.PREFIX}-goodput"
MET: Final = "met"
SHED_SOURCE: Final = "tap"  # a shed request is user traffic through the gateway


def goodput_ratio(by: Sequence[str], window_s: int) -> str:
    """Met requests over judged plus shed ones, aggregated by `by`; 0 (not absent) when none met."""
    judged = promql.rate(names.GOODPUT_REQUESTS_TOTAL, (), window_s)
    shed = promql.rate(names.GATEWAY_SHED_TOTAL, (), window_s)
    shed_as_tap = f'label_replace({shed}, "{names.SOURCE}", "{SHED_SOURCE}", "", "")'
    total = promql.sum_by(by, f"{judged} or {shed_as_tap}")
    met = promql.sum_by(by, promql.rate(names.GOODPUT_REQUESTS_TOTAL, [(names.OUTCOME, "=", MET)], window_s))
    return f"(\n  {met}\n  or\n  0 * {total}\n)\n/\n({total} > 0)"


def goodput_recordings(spec: Spec, groups: tuple[RuleGroup, ...]) -> tuple[RuleGroup, ...]:
    """Processor: goodput per lane, request class and source, and per lane and source."""
    window = spec.analysis_window_s
    rules = [
        record(names.GOODPUT_RATIO, goodput_ratio((names.LANE, names.REQUEST_CLASS, names.SOURCE), window)),
        record(names.LANE_GOODPUT_RATIO, goodput_ratio((names.LANE, names.SOURCE), window)),
    ]
    return extend(spec, groups, GROUP, rules)
