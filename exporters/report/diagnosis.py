"""The report's Diagnosis section: `lanewatch diagnose` over the same records, at the top of the page.

The records alone are the evidence (no Prometheus): a finding stands at the phase level where
vLLM's series would split its cause, and says which series. Anchored to the SLOs of the report's
judge (without one, none is held to an SLO). Everything shown is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from lanewatch.collector.diagnose import DEFAULT_THRESHOLDS, LaneDiagnosis, Window, diagnose, slo_targets
from lanewatch.collector.diagnose.model import Finding, Signal
from lanewatch.collector.diagnose.records import lanes_from_records
from lanewatch.collector.record.goodput import Goodput
from lanewatch.collector.record.timing import RequestTiming

from .svg import esc

__all__ = ["diagnosis_of", "diagnosis_section"]


def diagnosis_of(records: Sequence[RequestTiming], judge: Goodput | None) -> tuple[LaneDiagnosis, ...]:
    """Every lane's ranked findings from the records, anchored to the judge's SLOs."""
    slos = slo_targets(judge) if judge is not None else {}
    lanes = lanes_from_records(records, slos, DEFAULT_THRESHOLDS)
    return diagnose(Window(lanes, sources=("records",)), DEFAULT_THRESHOLDS)


def diagnosis_section(lanes: Sequence[LaneDiagnosis], judged: bool) -> str:
    """The section: each lane's findings with evidence and fixes, then what was unknown or ruled out."""
    found = sum(len(lane.found) for lane in lanes)
    anchor = (
        "Findings are anchored to the lanes' SLOs."
        if judged
        else "No SLO spec was given: no finding is held to a lane's SLO."
    )
    explain = (
        f"{found} finding{'s' if found != 1 else ''}, from the records alone, as "
        "<code>lanewatch diagnose records.jsonl</code> reports them (docs/diagnose.md). "
        f"{anchor} A cause vLLM's series would split stands at the phase level and names those "
        "series; <code>lanewatch diagnose --prometheus URL</code> adds them."
    )
    body = "".join(_lane(lane) for lane in lanes)
    return (
        f'<section id="diagnosis"><h2>Diagnosis: where the time goes and why</h2>'
        f'<p class="explain">{explain}</p>{body}</section>'
    )


def _lane(lane: LaneDiagnosis) -> str:
    head = f"<h3>{esc(lane.lane)} lane: " + (
        f"{len(lane.found)} found, top <code>{esc(lane.found[0].check)}</code></h3>"
        if lane.found
        else "no finding</h3>"
    )
    items = "".join(_finding(f) for f in lane.found)
    out = head + (f'<ol class="findings">{items}</ol>' if items else "")
    out += _unknown(lane.findings)
    ok = [f.check for f in lane.findings if f.verdict == "ok"]
    if ok:
        out += f'<p class="explain">Ruled out: {", ".join(f"<code>{esc(c)}</code>" for c in ok)}</p>'
    return out


def _unknown(findings: Sequence[Finding]) -> str:
    """The checks that could not judge, as one line; the data each lacks behind a disclosure.

    Every lane of a records file lacks the same few vLLM series, so a line per check would repeat
    them down the page; the line counts the checks and names the first missing series.
    """
    unknown = [f for f in findings if f.verdict == "unknown"]
    if not unknown:
        return ""
    needed: dict[str, list[str]] = {}  # missing data -> the checks it would let judge, as first seen
    for f in unknown:
        for series in f.missing or ("data not named",):
            needed.setdefault(series, []).append(f.check)
    first, *rest = needed
    more = f" and {len(rest)} more" if rest else ""
    head = f"{len(unknown)} check{'s' if len(unknown) != 1 else ''} unknown: missing {first}{more}"
    rows = "".join(
        f"<li>{esc(series)}: {', '.join(f'<code>{esc(c)}</code>' for c in checks)}</li>"
        for series, checks in needed.items()
    )
    return f'<details class="unknown"><summary>{esc(head)}</summary><ul>{rows}</ul></details>'


def _finding(f: Finding) -> str:
    share = f" (explains {f.explains.share:.0%} of {f.explains.of.upper()})" if f.explains else ""
    parts = [f"<li><b><code>{esc(f.check)}</code>: {esc(f.title)}</b>{esc(share)}<br/>{esc(f.summary)}"]
    evidence = "".join(f"<li>{_signal(s)}</li>" for s in f.evidence)
    parts.append(f'<ul class="evidence">{evidence}</ul>' if evidence else "")
    if f.missing:
        parts.append(f"<p>Would split or measure it: {esc(', '.join(f.missing))}</p>")
    if f.ruled_out:
        parts.append(f"<p>Ruled out: {esc('; '.join(f.ruled_out))}</p>")
    fixes = "".join(f"<li>{esc(x.action)}: {esc(x.effect)} [{esc(x.source)}]</li>" for x in f.fixes)
    parts.append(f'<ul class="fixes">{fixes}</ul>' if fixes else "")
    return "".join(parts) + "</li>"


def _signal(s: Signal) -> str:
    held = f" {s.comparison} {s.threshold:g}" if s.threshold is not None else ""
    mark = " &#8592; breached" if s.breached else ""
    return f"{esc(s.signal)}: {s.value:.4g}{esc(held)}{mark} <small>[{esc(s.source)}]</small>"
