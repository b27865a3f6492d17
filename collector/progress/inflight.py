"""Requests under way, as the fast guard needs them: each one's lane, start and first token.

A request's TTFT is known the moment its first token arrives, and a request still waiting is
known to be late the moment its age passes the SLO; a record made when the request ends says
both seconds too late. The data path registers each request here (`start`, `end`: a dict
insert and delete) and hands a getter for its first token's time, read only when a report is
made. `report` turns the table into progress events every fraction of a second: one
`first_token` event per request once its first token came (its TTFT), and, for each request
still waiting, its age so far. Judging them against the SLO is the guard's (collector/guard/),
which alone holds the thresholds. Pure: times are the caller's (perf_counter seconds).

What a caller registers is the evidence contract's (docs/slo.md): a streamed request only (a
whole answer's first token is not observable), started when its body has fully arrived (or, for a
client, been fully sent): a client's upload is not a wait on the lane.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MAX_REPORT_EVENTS", "FirstAt", "InFlight", "Progress"]

FirstAt = Callable[[], float | None]  # the first token's time, None until it came
MAX_REPORT_EVENTS = 4096  # events in one report; a table bigger than that reports its oldest first
_MAX_ENDED = 4096  # ended requests whose first token was not reported yet


@dataclass(frozen=True, slots=True)
class Progress:
    """One request's progress: its TTFT (`first_token`), or its age while it still waits."""

    id: int  # unique within its reporter
    lane: str  # the lane that serves it
    age_s: float  # TTFT when `first_token`, else seconds since it started (its body's end)
    first_token: bool


@dataclass(slots=True)
class _Entry:
    lane: str
    t0: float
    first_at: FirstAt


class InFlight:
    """The table of requests under way, and the events not yet reported."""

    __slots__ = ("_ended", "_entries", "_next", "dropped")

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}
        self._ended: list[Progress] = []  # first tokens of requests that ended between reports
        self._next = 0
        self.dropped = 0  # events not reported: more ended requests than a report takes

    def __len__(self) -> int:
        return len(self._entries)

    def start(self, lane: str, t0: float, first_at: FirstAt) -> int:
        """Register a streamed request whose body had fully arrived at `t0`; returns its id."""
        self._next += 1
        self._entries[self._next] = _Entry(lane, t0, first_at)
        return self._next

    def end(self, rid: int, now: float | None = None) -> None:
        """The request ended: its first token is reported once more if no report saw it yet; with
        `now`, one that ended without a token reports its last age (a late attempt given up past
        its SLO is judged missed even when no report saw it waiting that long)."""
        entry = self._entries.pop(rid, None)
        if entry is None:
            return
        first = entry.first_at()
        if first is None and now is None:  # ended without a token: judged (if late) by the ages reported
            return
        if len(self._ended) >= _MAX_ENDED:
            self.dropped += 1
            return
        if first is None:
            assert now is not None
            self._ended.append(Progress(rid, entry.lane, max(now - entry.t0, 0.0), False))
        else:
            self._ended.append(Progress(rid, entry.lane, max(first - entry.t0, 0.0), True))

    def report(self, now: float) -> list[Progress]:
        """Events since the last report: first tokens that came, and every waiting request's age."""
        out, self._ended = self._ended, []
        done = []
        for rid, entry in self._entries.items():
            if len(out) >= MAX_REPORT_EVENTS:
                break
            first = entry.first_at()
            if first is None:
                out.append(Progress(rid, entry.lane, max(now - entry.t0, 0.0), False))
            else:
                out.append(Progress(rid, entry.lane, max(first - entry.t0, 0.0), True))
                done.append(rid)
        for rid in done:  # reported: its end adds nothing
            del self._entries[rid]
        return out
