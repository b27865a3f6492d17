"""The demo's timeline: warm up, inject a slowdown into the slow lane, clear it, watch recovery.

`next_step` is pure: from the plan, the seconds since the start and what has happened so far
(`(elapsed, kind)` in order), it says what to do now. Steps wait on what the stack shows,
not on fixed times, with deadlines so the demo always ends: the fault clears once the user
has seen the shift for `show_shift_s` (or after `max_fault_s` regardless), and the demo
ends `tail_s` after the traffic is back, or at `duration_s`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_FAULT", "Plan", "Step", "next_step"]

# Every slow-lane request waits 3 s in the engine's queue: TTFT passes the slow lane's 2 s SLO
# threshold (alerts/slos-demo.yaml) for every request, while nothing else changes.
DEFAULT_FAULT: Mapping[str, Any] = {"queue_delay_s": 3.0}

Happened = Sequence[tuple[float, str]]


class Step(enum.Enum):
    """What the demo does now."""

    WAIT = "wait"
    INJECT = "inject"
    CLEAR = "clear"
    FINISH = "finish"


@dataclass(frozen=True)
class Plan:
    """Timings of one demo run, in seconds from the moment the stack is up."""

    duration_s: float = 240.0
    warmup_s: float = 20.0
    show_shift_s: float = 15.0
    max_fault_s: float = 90.0
    tail_s: float = 15.0
    lane: str = "slow"
    fault: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_FAULT))


def _first(happened: Happened, kind: str, after: float = float("-inf")) -> float | None:
    return next((t for t, k in happened if k == kind and t >= after), None)


def _last(happened: Happened, kind: str) -> float | None:
    times = [t for t, k in happened if k == kind]
    return times[-1] if times else None


def next_step(plan: Plan, elapsed: float, happened: Happened, degraded: bool = False) -> Step:
    """What to do `elapsed` seconds into the run, given the events so far; `degraded`: a lane is
    still degraded now (another lane may have been restored since its last apply), so the traffic
    is not back yet."""
    if elapsed >= plan.duration_s:
        return Step.FINISH
    injected = _first(happened, "fault_injected")
    if injected is None:
        return Step.INJECT if elapsed >= plan.warmup_s else Step.WAIT
    cleared = _first(happened, "fault_cleared")
    if cleared is None:
        applied = _first(happened, "degrade_applied", after=injected)
        shown = applied is not None and elapsed - applied >= plan.show_shift_s
        return Step.CLEAR if shown or elapsed - injected >= plan.max_fault_s else Step.WAIT
    if degraded:
        return Step.WAIT
    return Step.FINISH if _settled_since(happened, cleared, elapsed) >= plan.tail_s else Step.WAIT


def _settled_since(happened: Happened, cleared: float, elapsed: float) -> float:
    """Seconds since the traffic came back after the fault cleared (0 while a lane is still degraded)."""
    applied, restored = _last(happened, "degrade_applied"), _last(happened, "degrade_restored")
    if applied is None:  # nothing was degraded (no alerting, or the alert never fired)
        return elapsed - cleared
    if restored is None or restored < applied:
        return 0.0
    return elapsed - max(restored, cleared)
