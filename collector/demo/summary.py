"""summary.json: per-lane statistics of the run, the events in order, and the loop's measured delays.

`build_summary` and `loop_timings` are pure; `write_outputs` writes summary.json and the
HTML report (exporters/report.py through `lanewatch report`'s `write_report`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lanewatch.collector.record.timing import RequestTiming

from .events import Event, story_complete
from .records import lane_stats

__all__ = ["build_summary", "loop_timings", "write_summary"]

STORY_ALERT = "LanewatchTTFTBurnRate"


def _first(events: Sequence[Event], kind: str, after: float = float("-inf"), **match: str) -> float | None:
    for e in events:
        if e.kind == kind and e.t >= after and all(e.details.get(k) == v for k, v in match.items()):
            return e.t
    return None


def loop_timings(events: Sequence[Event], lane: str = "slow") -> dict[str, float | None]:
    """Seconds from the fault to the TTFT page on `lane` and on to the degrade; from the clear to the
    resolve and on to the restore (None where a step did not happen)."""
    alert = {"alertname": STORY_ALERT, "lane": lane, "severity": "page"}
    injected = _first(events, "fault_injected")
    firing = _first(events, "alert_firing", injected or 0.0, **alert)
    applied = _first(events, "degrade_applied", firing or injected or 0.0, lane=lane)
    cleared = _first(events, "fault_cleared")
    resolved = _first(events, "alert_resolved", cleared or 0.0, **alert)
    restored = _first(events, "degrade_restored", resolved or cleared or 0.0, lane=lane)

    def gap(a: float | None, b: float | None) -> float | None:
        return round(b - a, 3) if a is not None and b is not None else None

    return {
        "fault_to_alert_s": gap(injected, firing),
        "alert_to_degrade_s": gap(firing, applied),
        "clear_to_resolve_s": gap(cleared, resolved),
        "resolve_to_restore_s": gap(resolved, restored),
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


def build_summary(
    records: Sequence[RequestTiming],
    events: Sequence[Event],
    run: Mapping[str, Any],
) -> dict[str, Any]:
    """The summary.json document: `run` (how the demo ran), lanes, loop timings, events."""
    return {
        **run,
        "story_complete": story_complete(events),
        "loop": loop_timings(events),
        "lanes": _lanes(records),
        "events": [e.to_json() for e in events],
    }


def write_summary(path: Path, summary: Mapping[str, Any]) -> None:
    """Write summary.json beside the records (atomically: a reader never sees half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
