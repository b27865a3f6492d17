"""The fast guard: verdicts in, alerts out, a few times a second.

It takes progress events posted by the gateway (`POST /v1/progress`), the in-process prober's
in-flight table (read each tick), and the finished records of sources that report no progress
(`record_sources`). Each tick steps every lane SLO (decide.py) and hands the alerts due to
`send`: at once when a lane fires or resolves, again every `resend_s` while it fires, and
again next tick when a send failed. It never decides a degrade: Alertmanager and the controller
do, as for the rules' alerts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lanewatch.collector.progress.inflight import InFlight, Progress
from lanewatch.collector.record.timing import RequestTiming

from .alert import GuardAlert, postable
from .decide import GuardRule, LaneState, Verdicts, step
from .judge import Judge, Verdict

__all__ = ["FastGuard", "LaneView", "Send"]

log = logging.getLogger("lanewatch.guard")
Send = Callable[[list[dict[str, Any]]], Awaitable[bool]]  # True when Alertmanager took them


@dataclass(frozen=True, slots=True)
class LaneView:
    """One lane SLO's guard as /metrics shows it."""

    lane: str
    slo: str
    firing: bool
    changed_at: float | None  # Unix time of the last change
    judged: int  # in the window that decides now (fire window, or resolve window while firing)
    missed: int
    verdicts: dict[str, int]  # verdict -> count since start


@dataclass(slots=True)
class _Lane:
    alert: GuardAlert
    verdicts: Verdicts
    state: LaneState
    starts_at: float | None = None  # Unix time the current firing began
    changed_at: float | None = None
    send_due: float | None = None  # monotonic time the next send is due; None: nothing to send


class FastGuard:
    """Judges requests per lane and keeps Alertmanager told of each lane SLO's state."""

    def __init__(
        self,
        alerts: Iterable[GuardAlert],
        rule: GuardRule,
        record_sources: Iterable[str] = ("envoy",),
        resend_s: float = 5.0,
        generator_url: str = "",
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        keep = max(rule.fire_window_s, rule.resolve_window_s)
        self.rule = rule
        self._lanes = {a.lane: _Lane(a, Verdicts(keep), LaneState()) for a in alerts}
        self.judge = Judge({lane: s.alert.threshold_s for lane, s in self._lanes.items()})
        self._record_sources = frozenset(record_sources)
        self._resend_s = resend_s
        self._generator_url = generator_url
        self._clock, self._wall = clock, wall
        self._local: list[tuple[str, InFlight]] = []
        self.verdicts: Counter[tuple[str, str]] = Counter()  # (lane, verdict) -> count
        self.posts: Counter[str] = Counter()  # ok | failed
        self._kick = asyncio.Event()  # a miss arrived on a lane that is not firing

    @property
    def lanes(self) -> list[str]:
        """The lanes guarded (those with a TTFT SLO)."""
        return list(self._lanes)

    def watch(self, reporter: str, table: InFlight) -> None:
        """Read an in-process in-flight table (the prober's) every tick."""
        self._local.append((reporter, table))

    def progress(self, reporter: str, events: Iterable[Progress]) -> None:
        """Judge a reporter's progress events now."""
        now = self._clock()
        for event in events:
            self._count(event.lane, self.judge.progress(reporter, event, now), now)

    def record(self, record: RequestTiming) -> None:
        """Judge a finished record, when its source reports no progress."""
        if record.source in self._record_sources:
            self._count(record.lane, self.judge.record(record), self._clock())

    def _count(self, lane: str, verdict: Verdict | None, now: float) -> None:
        if verdict is None:
            return
        state = self._lanes[lane]
        state.verdicts.add(now, verdict == "missed")
        self.verdicts[(lane, verdict)] += 1
        if verdict == "missed" and not state.state.firing:
            self._kick.set()  # it may fire now: evaluate without waiting for the tick

    def evaluate(self) -> list[dict[str, Any]]:
        """Step every lane SLO; the postable alerts due now (a change, a re-send, a retry)."""
        now, wall = self._clock(), self._wall()
        for reporter, table in self._local:
            self.progress(reporter, table.report(now))
        due = []
        for name, lane in self._lanes.items():
            before = lane.state
            lane.state = step(self.rule, before, lane.verdicts, now)
            if lane.state.firing != before.firing:
                lane.changed_at = wall
                lane.send_due = now
                if lane.state.firing:  # the breach began with its first miss (see alert.py)
                    first = lane.verdicts.first_missed(now, self.rule.fire_window_s)
                    lane.starts_at = wall - (now - first if first is not None else 0.0)
                log.warning(
                    "fast guard: lane %s %s %s (%d of %d judged requests missed)",
                    name,
                    lane.alert.slo,
                    "fires" if lane.state.firing else "resolves",
                    lane.state.missed,
                    lane.state.judged,
                )
            if lane.send_due is not None and now >= lane.send_due and lane.starts_at is not None:
                ends = wall + 3 * self._resend_s if lane.state.firing else wall
                s = lane.state
                due.append(
                    postable(lane.alert, lane.starts_at, ends, s.judged, s.missed, self._generator_url)
                )
        return due

    def sent(self, alerts: list[dict[str, Any]], ok: bool) -> None:
        """Note the outcome of sending `alerts`: the next send of each lane, or a retry next tick."""
        self.posts["ok" if ok else "failed"] += 1
        if not ok:
            return
        now = self._clock()
        for body in alerts:
            lane = self._lanes[body["labels"]["lane"]]
            lane.send_due = now + self._resend_s if lane.state.firing else None

    def views(self) -> list[LaneView]:
        """Every lane SLO's state, for /metrics."""
        return [
            LaneView(
                name,
                lane.alert.slo,
                lane.state.firing,
                lane.changed_at,
                lane.state.judged,
                lane.state.missed,
                {v: self.verdicts[(name, v)] for v in ("met", "missed")},
            )
            for name, lane in self._lanes.items()
        ]

    async def run(self, stop: asyncio.Event, send: Send, tick_s: float) -> None:
        """Evaluate every `tick_s`, and at once when a miss arrives, until `stop`; send what is due."""
        while not stop.is_set():
            due = self.evaluate()
            if due:
                try:
                    ok = await send(due)
                except Exception:  # a bug in sending must not end the guard
                    log.exception("sending the fast guard's alerts failed")
                    ok = False
                self.sent(due, ok)
            self._kick.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(tick_s):
                    await _first(stop, self._kick)


async def _first(*events: asyncio.Event) -> None:
    """Return once any of `events` is set."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
