"""Run every check over every lane of a window and rank the results. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from lanewatch.collector.diagnose.evidence import Window
from lanewatch.collector.diagnose.model import Check, Finding, LaneDiagnosis
from lanewatch.collector.diagnose.registry import CHECKS
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds

__all__ = ["diagnose", "ranked", "top_findings"]


def diagnose(
    window: Window, thresholds: Thresholds = DEFAULT_THRESHOLDS, checks: Sequence[Check] = CHECKS
) -> tuple[LaneDiagnosis, ...]:
    """Every lane's findings, each lane's list ranked (findings explaining most first)."""
    out = []
    for name in window.diagnosed:
        lane = window.lanes[name]
        findings = [check.run(lane, window, thresholds) for check in checks]
        out.append(LaneDiagnosis(name, ranked(findings)))
    return tuple(out)


def ranked(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """Findings first, the larger explained share first; then unknowns, then oks."""
    return tuple(sorted(findings, key=lambda f: f.rank_key))


def top_findings(lanes: Sequence[LaneDiagnosis]) -> tuple[Finding, ...]:
    """Every lane's findings (verdict `finding`), ranked together."""
    return ranked([f for lane in lanes for f in lane.found])
