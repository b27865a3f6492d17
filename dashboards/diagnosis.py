"""The diagnosis's signals per lane, each against the threshold `lanewatch diagnose` holds it to.

The series come from the recording rules of alerts/diagnosis.py; the red line of each panel is
the same threshold (collector/diagnose/thresholds.py), so the panel and the diagnosis never
disagree about where a signal turns bad.
"""

from __future__ import annotations

from typing import Any

from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from lanewatch.exporters import names

from .panels import Query, Steps, timeseries
from .templating import LANE, sel

# (threshold name, title, unit, red below the threshold rather than at or above it, what to do)
SIGNALS: tuple[tuple[str, str, str, bool, str], ...] = (
    ("queue_share", "Queue share of TTFT", "percentunit", False, "queue-bound: see waiting and KV usage"),
    (
        "prefill_share",
        "Prefill share of TTFT",
        "percentunit",
        False,
        "prefill-bound: see prefix reuse",
    ),
    ("waiting_above", "vLLM requests waiting", "short", False, "requests wait for a batch slot"),
    ("kv_usage", "vLLM KV-cache usage", "percentunit", False, "memory-bound: requests wait or are preempted"),
    ("preemptions_per_s", "vLLM preemptions per second", "short", False, "KV memory pressure"),
    (
        "prefix_hit_rate",
        "vLLM prefix-cache hit rate",
        "percentunit",
        True,
        "low reuse: stable prefixes",
    ),
    ("error_share", "Failed share of requests", "percentunit", False, "errors and shedding"),
)


def _steps(value: float, below: bool) -> Steps:
    return [("red", None), ("green", value)] if below else [("green", None), ("red", value)]


def diagnosis_panels(t: Thresholds = DEFAULT_THRESHOLDS) -> list[Any]:
    """One panel per signal: each lane's value and the diagnosis's threshold for it."""
    panels = []
    for name, title, unit, below, meaning in SIGNALS:
        value = float(getattr(t, name))
        side = "below" if below else "at or above"
        description = (
            f"{title} per lane over the rules' analysis window (recording rule "
            f"{names.DIAGNOSE_SIGNAL}, signal {name}). Red {side} {value:g}, the threshold "
            f"`lanewatch diagnose` holds it to ({name}): {meaning}. Run `lanewatch diagnose "
            "--prometheus URL --lane L` for the ranked findings and their fixes."
        )
        signal = f'{names.DIAGNOSE_SIGNAL_LABEL}="{name}"'
        queries = [
            Query(sel(names.DIAGNOSE_SIGNAL, LANE, signal), "{{lane}}"),
            Query(f"{names.DIAGNOSE_THRESHOLD}{{{signal}}}", "threshold"),
        ]
        panels.append(
            timeseries(f"Diagnosis: {title}", description, queries, unit, _steps(value, below), w=8, h=7)
        )
    return panels
