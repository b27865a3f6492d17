"""summary.json: per-lane statistics of the run, the events in order, and the loop's measured delays.

`build_summary` and `loop_timings` are pure; `write_outputs` writes summary.json and the
HTML report (exporters/report/render.py through exporters/report/file.py's `write_report`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lanewatch.collector.record.goodput import Goodput, Tally, outcome, routed_lane
from lanewatch.collector.record.timing import RequestTiming

from .events import Event, story_complete
from .records import lane_stats

__all__ = ["build_summary", "loop_timings", "write_summary"]


def _first(events: Sequence[Event], kind: str, after: float = float("-inf"), **match: str) -> float | None:
    for e in events:
        if e.kind == kind and e.t >= after and all(e.details.get(k) == v for k, v in match.items()):
            return e.t
    return None


_CONTROLLER_SEVERITIES = ("page", "mitigate")  # the alerts the demo's controller acts on


def _alerts_resolved(events: Sequence[Event], lane: str, after: float) -> float | None:
    """When the last of `lane`'s controller-bound alerts that fired resolved after `after`; None while
    one still fires."""
    firing: set[tuple[str, str, str]] = set()
    at: float | None = None
    for e in events:
        if e.details.get("lane") != lane or e.kind not in ("alert_firing", "alert_resolved"):
            continue
        if e.details.get("severity") not in _CONTROLLER_SEVERITIES:
            continue
        key = (str(e.details.get("alertname")), str(e.details.get("severity")), str(e.details.get("source")))
        if e.kind == "alert_firing":
            firing.add(key)
            at = None
        elif key in firing:
            firing.discard(key)
            if not firing and e.t >= after:
                at = e.t
    return at if not firing else None


def _first_alert(events: Sequence[Event], lane: str, after: float) -> Event | None:
    for e in events:
        here = e.kind == "alert_firing" and e.t >= after and e.details.get("lane") == lane
        if here and e.details.get("severity") in _CONTROLLER_SEVERITIES:
            return e
    return None


def loop_timings(events: Sequence[Event], lane: str = "slow") -> dict[str, Any]:
    """Seconds from the fault to `lane`'s first alert and on to the degrade; from the clear to the
    resolve of its last alert and on to the restore (None where a step did not happen); and which
    source fired first (`fired_by`: `guard`, the fast guard, or `rules`, Prometheus').

    Any alert that reaches the controller counts, as it does for the controller: the fast guard's,
    a mitigation rule's or a page (a burst of long prompts may break TPOT before TTFT, and the shift
    follows whichever fires first).
    """
    injected = _first(events, "fault_injected")
    first = _first_alert(events, lane, injected or 0.0)
    firing = first.t if first is not None else None
    applied = _first(events, "degrade_applied", firing or injected or 0.0, lane=lane)
    cleared = _first(events, "fault_cleared")
    resolved = _alerts_resolved(events, lane, cleared) if cleared is not None else None
    restored = _first(events, "degrade_restored", resolved or cleared or 0.0, lane=lane)

    def gap(a: float | None, b: float | None) -> float | None:
        return round(b - a, 3) if a is not None and b is not None else None

    return {
        "fault_to_alert_s": gap(injected, firing),
        "alert_to_degrade_s": gap(firing, applied),
        "clear_to_resolve_s": gap(cleared, resolved),
        "resolve_to_restore_s": gap(resolved, restored),
        "fired_by": first.details.get("source", "rules") if first is not None else None,
    }


def _lanes(records: Sequence[RequestTiming]) -> dict[str, Any]:
    stats = lane_stats(records)
    out: dict[str, Any] = {}
    for lane in sorted({r.lane for r in records}):
        rs = [r for r in records if r.lane == lane]
        out[lane] = {
            "requests": len(rs),
            "errors": sum(not r.ok for r in rs),
            "by_source": dict(Counter(r.source for r in rs)),
            "by_class": dict(Counter(r.request_class for r in rs)),
            "metrics": {
                p: {k: round(v, 6) for k, v in asdict(s).items()} for p, s in stats.get(lane, {}).items()
            },
        }
    return out


PHASES = ("before", "fault", "degraded", "after")


def phase_bounds(events: Sequence[Event], lane: str = "slow") -> dict[str, tuple[float, float]]:
    """Unix-time spans of the run's phases: before the fault, the fault until the degrade took
    effect, the fault while degraded, and after the fault cleared (phases that did not happen
    are left out)."""
    injected = _first(events, "fault_injected")
    if injected is None:
        return {"before": (float("-inf"), float("inf"))}
    cleared = _first(events, "fault_cleared", injected)
    applied = _first(events, "degrade_applied", injected, lane=lane)
    end = cleared if cleared is not None else float("inf")
    out = {"before": (float("-inf"), injected)}
    if applied is not None and applied < end:
        out.update(fault=(injected, applied), degraded=(applied, end))
    else:
        out["fault"] = (injected, end)
    if cleared is not None:
        out["after"] = (cleared, float("inf"))
    return out


def goodput_by_phase(
    judge: Goodput,
    records: Sequence[RequestTiming],
    events: Sequence[Event],
    shed: Sequence[tuple[float, str, str]] = (),
    lane: str = "slow",
) -> dict[str, Any]:
    """Goodput per phase, routed lane and source, by when each request started; `shed` holds
    (Unix time, routed lane, class) of requests the gateway refused, counted as tap misses."""
    bounds = phase_bounds(events, lane)
    tallies: dict[str, dict[str, dict[str, Tally]]] = {p: {} for p in bounds}

    def phase_of(t: float) -> str | None:
        return next((p for p, (a, b) in bounds.items() if a <= t < b), None)

    for r in records:
        phase = phase_of(r.started_at)
        if phase is not None:
            tallies[phase].setdefault(routed_lane(r), {}).setdefault(r.source, Tally()).add(outcome(judge, r))
    for t, routed, _cls in shed:
        phase = phase_of(t)
        if phase is not None:
            tallies[phase].setdefault(routed, {}).setdefault("tap", Tally()).add("missed")
    return {
        "phases": {
            p: [None if abs(x) == float("inf") else round(x, 3) for x in b] for p, b in bounds.items()
        },
        "by_phase": {
            p: {
                ln: {
                    src: {"ratio": None if t.ratio is None else round(t.ratio, 4), **asdict(t)}
                    for src, t in sorted(by_src.items())
                }
                for ln, by_src in sorted(lanes.items())
            }
            for p, lanes in tallies.items()
        },
    }


def rescue_during_fault(
    judge: Goodput, records: Sequence[RequestTiming], events: Sequence[Event], lane: str = "slow"
) -> dict[str, Any] | None:
    """The gateway's rescue while the fault held `lane` before its degrade: of the streamed requests
    routed there (tap records with a first token), how many a faster lane answered, and how many
    still missed the lane's TTFT SLO; None without a fault phase or a TTFT SLO for the lane."""
    span = phase_bounds(events, lane).get("fault")
    slo = next(
        (b.threshold_s for b in judge.bounds.get(lane, ()) if b.metric == "ttft" and not b.selector), None
    )
    if span is None or slo is None:
        return None
    streamed = [
        r
        for r in records
        if r.source == "tap"
        and routed_lane(r) == lane
        and r.ttft_s is not None
        and span[0] <= r.started_at < span[1]
    ]
    rescued = sum(r.late_lane == lane and r.lane != lane for r in streamed)
    missed = sum(r.ttft_s is not None and r.ttft_s > slo for r in streamed)
    return {"lane": lane, "slo_s": slo, "streamed": len(streamed), "rescued": rescued, "missed": missed}


def rescue_line(rescue: Mapping[str, Any]) -> str:
    """One line for the console: what the rescue did during the fault."""
    lane, slo = rescue["lane"], rescue["slo_s"]
    return (
        f"rescue: {rescue['rescued']} of {rescue['streamed']} streamed {lane}-lane requests during the "
        f"fault were answered by a faster lane; {rescue['missed']} still missed the {slo:g} s TTFT SLO"
    )


def build_summary(
    records: Sequence[RequestTiming],
    events: Sequence[Event],
    run: Mapping[str, Any],
    goodput: Goodput | None = None,
    shed: Sequence[tuple[float, str, str]] = (),
    diagnosis: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary.json document: `run` (how the demo ran), lanes, loop timings, goodput, the
    diagnosis of the faulted lane during the fault (docs/demo.md), events."""
    out = {
        **run,
        "story_complete": story_complete(events),
        "loop": loop_timings(events),
        "lanes": _lanes(records),
    }
    if goodput is not None:
        out["goodput"] = goodput_by_phase(goodput, records, events, shed)
        out["rescue"] = rescue_during_fault(goodput, records, events)
    out["diagnosis"] = dict(diagnosis) if diagnosis is not None else None
    out["events"] = [e.to_json() for e in events]
    return out


def write_summary(path: Path, summary: Mapping[str, Any]) -> None:
    """Write summary.json beside the records (atomically: a reader never sees half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
