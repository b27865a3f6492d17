"""When the guard fires and resolves: the share of a lane's recent requests that missed, over an
evidence floor. Pure dataclasses and functions; `now` is the caller's (monotonic) clock.

It fires on a short window (`fire_window_s`): once at least `min_judged` requests were judged
there, at least `min_missed` of them missed, and the missed share is above `fire_ratio` (the
SLO spec's mitigation error ratio, as the rules use it). One slow request, a lane with little
traffic, and client errors (never judged) cannot pass that floor. It resolves on a longer
window (`resolve_window_s`), no sooner than one such window after it fired, once the floor of
judged requests is there again and the missed share is at most `resolve_ratio`: the gap between
the two ratios and the two windows is what keeps a blip from flapping. With no evidence it holds
what it says: a lane whose traffic moved away is still measured by the probes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

__all__ = ["BUCKET_S", "GuardRule", "LaneState", "Verdicts", "step"]

BUCKET_S = 0.25  # verdicts are counted in buckets this wide: a window costs a few dozen additions


@dataclass(frozen=True, slots=True)
class GuardRule:
    """The guard's windows, floor and ratios."""

    fire_window_s: float = 3.0
    resolve_window_s: float = 10.0
    min_judged: int = 4
    min_missed: int = 3
    fire_ratio: float = 0.5
    resolve_ratio: float = 0.25


@dataclass(frozen=True, slots=True)
class LaneState:
    """One lane SLO's guard: firing or not, since when, and the counts that last decided."""

    firing: bool = False
    since: float | None = None  # monotonic time of the last change
    judged: int = 0
    missed: int = 0


class Verdicts:
    """A lane's verdicts in time buckets, kept for the longer window."""

    __slots__ = ("_buckets", "_keep_s")

    def __init__(self, keep_s: float) -> None:
        self._keep_s = keep_s
        self._buckets: deque[list[float]] = deque()  # [bucket start, judged, missed], oldest first

    def add(self, now: float, missed: bool) -> None:
        """Count one verdict at `now`."""
        start = now - now % BUCKET_S
        buckets = self._buckets
        if not buckets or buckets[-1][0] < start:
            buckets.append([start, 0, 0])
        last = buckets[-1]
        last[1] += 1
        last[2] += missed
        self._trim(now)

    def counts(self, now: float, window_s: float) -> tuple[int, int]:
        """Judged and missed over the last `window_s` seconds."""
        self._trim(now)
        since = now - window_s
        judged = missed = 0
        for start, j, m in reversed(self._buckets):
            if start + BUCKET_S <= since:
                break
            judged += int(j)
            missed += int(m)
        return judged, missed

    def first_missed(self, now: float, window_s: float) -> float | None:
        """The start of the oldest bucket in the last `window_s` seconds that holds a miss."""
        since = now - window_s
        for start, _, m in self._buckets:
            if start + BUCKET_S > since and m:
                return start
        return None

    def _trim(self, now: float) -> None:
        buckets, horizon = self._buckets, now - self._keep_s - BUCKET_S
        while buckets and buckets[0][0] < horizon:
            buckets.popleft()


def step(rule: GuardRule, state: LaneState, verdicts: Verdicts, now: float) -> LaneState:
    """The lane's state after looking at its verdicts now."""
    if not state.firing:
        judged, missed = verdicts.counts(now, rule.fire_window_s)
        if judged >= rule.min_judged and missed >= rule.min_missed and missed > rule.fire_ratio * judged:
            return LaneState(True, now, judged, missed)
        return replace(state, judged=judged, missed=missed)
    judged, missed = verdicts.counts(now, rule.resolve_window_s)
    settled = state.since is None or now - state.since >= rule.resolve_window_s
    if settled and judged >= rule.min_judged and missed <= rule.resolve_ratio * judged:
        return LaneState(False, now, judged, missed)
    return replace(state, judged=judged, missed=missed)
