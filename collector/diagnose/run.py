"""Run the chosen checks over every lane of a window and rank the results. Pure.

A check runs only when the lane has the evidence it declares in `needs`; otherwise, or when it
finds a key missing on the way (`evidence.need`), its finding is `unknown` naming what is missing.
A check's finding that one of its `explained_by` checks' findings already explains becomes `ok`.
"""

from __future__ import annotations

from collections.abc import Sequence

from lanewatch.collector.diagnose.evidence import EVIDENCE, Gap, LaneEvidence, Missing, Need, Window
from lanewatch.collector.diagnose.model import Check, Finding, LaneDiagnosis
from lanewatch.collector.diagnose.registry import planned, select
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds

__all__ = ["diagnose", "gaps", "judge", "ranked", "top_findings"]


def diagnose(
    window: Window, thresholds: Thresholds = DEFAULT_THRESHOLDS, checks: Sequence[Check] | None = None
) -> tuple[LaneDiagnosis, ...]:
    """Every lane's findings, each lane's list ranked (findings explaining most first).

    `checks` defaults to the registered ones the thresholds' `checks` and `skip` choose."""
    chosen = tuple(checks) if checks is not None else select(thresholds.checks, thresholds.skip)
    run = planned(chosen)
    out = []
    for name in window.diagnosed:
        lane = window.lanes[name]
        by_id = {c.id: judge(c, lane, window, thresholds) for c in run}
        out.append(LaneDiagnosis(name, ranked([_explained(c, by_id) for c in chosen])))
    return tuple(out)


def gaps(needs: Sequence[Need], lane: LaneEvidence, window: Window, t: Thresholds) -> tuple[Gap, ...]:
    """What the lane lacks of `needs`: a gap with a reason alone (the lane cannot be judged), else all."""
    out: list[Gap] = []
    for n in needs:
        keys = (n,) if isinstance(n, str) else n
        found = [g for k in keys if (g := EVIDENCE[k].absent(lane, window, t)) is not None]
        if len(found) < len(keys):  # one of the alternatives is there
            continue
        if any(g.why for g in found):
            return (next(g for g in found if g.why),)
        out += found
    return tuple(out)


def judge(check: Check, lane: LaneEvidence, window: Window, t: Thresholds) -> Finding:
    """The check's finding for one lane: `unknown` naming its gaps when it lacks what it needs."""
    missing = gaps(check.needs, lane, window, t)
    if not missing:
        try:
            return check.run(lane, window, t)
        except Missing as exc:
            missing = gaps((exc.key,), lane, window, t) or (EVIDENCE[exc.key].gap(lane, window, t),)
    series = tuple(g.series for g in missing)
    summary = missing[0].why or f"cannot judge: missing {', '.join(series)}"
    return Finding(check.id, check.title, lane.lane, "unknown", summary, missing=series)


def _explained(check: Check, by_id: dict[str, Finding]) -> Finding:
    """The check's finding, or `ok` when a check it names in `explained_by` found the cause."""
    f = by_id[check.id]
    fired = [c for c in check.explained_by if by_id[c].verdict == "finding"]
    if f.verdict != "finding" or not fired:
        return f
    summary = f"explained by {' and '.join(fired)}"
    return Finding(f.check, f.title, f.lane, "ok", summary, f.evidence, ruled_out=(summary,))


def ranked(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """Findings first, the larger explained share first; then unknowns, then oks."""
    return tuple(sorted(findings, key=lambda f: f.rank_key))


def top_findings(lanes: Sequence[LaneDiagnosis]) -> tuple[Finding, ...]:
    """Every lane's findings (verdict `finding`), ranked together."""
    return ranked([f for lane in lanes for f in lane.found])
