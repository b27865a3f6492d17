"""A diagnosis as readable, ranked text or as versioned JSON (docs/diagnose.md: the schema). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from lanewatch.collector.diagnose.model import Finding, LaneDiagnosis, Signal

__all__ = ["SCHEMA", "to_json", "to_text"]

SCHEMA = "lanewatch.diagnose/v1"


def to_json(
    lanes: Sequence[LaneDiagnosis], *, window: str | None = None, sources: Sequence[str] = ()
) -> dict[str, Any]:
    """The diagnosis as a JSON-ready dict: schema, window, sources, and each lane's ranked findings."""
    return {
        "schema": SCHEMA,
        "window": window,
        "sources": list(sources),
        "found": sum(len(lane.found) for lane in lanes),
        "lanes": [{"lane": lane.lane, "findings": [_finding(f) for f in lane.findings]} for lane in lanes],
    }


def _finding(f: Finding) -> dict[str, Any]:
    out = asdict(f)
    for key in ("evidence", "ruled_out", "fixes", "missing"):
        out[key] = list(out[key])
    return out


def to_text(lanes: Sequence[LaneDiagnosis], *, sources: Sequence[str] = ()) -> str:
    """Each lane's findings in rank order with their evidence and fixes; unknowns and oks in one line each."""
    found = sum(len(lane.found) for lane in lanes)
    head = f"{found} finding{'s' if found != 1 else ''}"
    lines = [f"diagnosis: {head}" + (f" from {'; '.join(sources)}" if sources else "")]
    for lane in lanes:
        lines.append("")
        lines.append(f"{lane.lane} lane: {_lane_head(lane)}")
        for i, f in enumerate(lane.found, start=1):
            lines += _finding_lines(i, f)
        unknown = [f for f in lane.findings if f.verdict == "unknown"]
        for f in unknown:
            lines.append(f"  unknown  {f.check}: {f.summary}")
        ok = [f.check for f in lane.findings if f.verdict == "ok"]
        if ok:
            lines.append(f"  ruled out: {', '.join(ok)}")
    return "\n".join(lines) + "\n"


def _lane_head(lane: LaneDiagnosis) -> str:
    if not lane.found:
        return "no finding"
    top = lane.found[0]
    return f"{len(lane.found)} found, top {top.check}"


def _finding_lines(rank: int, f: Finding) -> list[str]:
    share = f" (explains {f.explains.share:.0%} of {f.explains.of.upper()})" if f.explains else ""
    lines = [f"  {rank}. {f.check}: {f.title}{share}", f"     {f.summary}"]
    lines += [f"     - {_signal(s)}" for s in f.evidence]
    if f.missing:
        lines.append(f"     would split or measure it: {', '.join(f.missing)}")
    if f.ruled_out:
        lines.append(f"     ruled out: {'; '.join(f.ruled_out)}")
    lines += [f"     fix: {fix.action}: {fix.effect} [{fix.source}]" for fix in f.fixes]
    return lines


def _signal(s: Signal) -> str:
    held = f" {s.comparison} {s.threshold:g}" if s.threshold is not None else ""
    mark = "  <-" if s.breached else ""
    return f"{s.signal}: {s.value:.4g}{held}{mark}   [{s.source}]"
