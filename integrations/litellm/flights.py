"""The proxy's streamed requests under way, in the in-flight table the progress reporter reads.

The handler's hooks mark each streamed request's three moments on the proxy's event loop: its
start once LiteLLM has read the whole body (the pre-call hook), its first content chunk as the
proxy forwards it (the streaming iterator hook) and its end (the stream closed, or a success or
failure event, whichever comes first). A non-streamed request is never entered: its first token
is not observable. The table is bounded twice, so a hook LiteLLM skips on some path cannot grow
it: past `max_flights` a request is not entered (counted), and a request older than
`max_age_s` is ended unseen at the next start or report (counted): by then its age was reported
and judged long ago (the guard remembers a judged request for 600 s: keep `max_age_s` below). Pure:
times are the caller's (perf_counter seconds), and one thread (the loop) calls it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lanewatch.collector.progress.inflight import InFlight, Progress

__all__ = ["Flight", "Flights", "has_content"]


@dataclass(slots=True)
class Flight:
    """One streamed request under way: its id in the table, its start and its first content chunk."""

    rid: int
    t0: float
    first_at: float | None = None


class _Table(InFlight):
    """The in-flight table, whose every report first ends the flights past their age."""

    __slots__ = ("_before",)

    def __init__(self, before: Callable[[float], None]) -> None:
        super().__init__()
        self._before = before

    def report(self, now: float) -> list[Progress]:
        """Expire, then report (InFlight.report)."""
        self._before(now)
        return super().report(now)


class Flights:
    """The in-flight table and the flights the hooks hold, bounded in count and age."""

    def __init__(self, max_flights: int = 10_000, max_age_s: float = 300.0) -> None:
        self.table: InFlight = _Table(self._expire)
        self._open: OrderedDict[int, Flight] = OrderedDict()  # oldest first: starts come in time order
        self._max, self._max_age = max_flights, max_age_s
        self.refused = 0  # streamed requests not entered: the table was full
        self.expired = 0  # flights ended by age: no hook said they ended

    def __len__(self) -> int:
        return len(self._open)

    def begin(self, lane: str, now: float) -> Flight | None:
        """Enter a streamed request of `lane` whose body arrived at `now`; None when full."""
        self._expire(now)
        if len(self._open) >= self._max:
            self.refused += 1
            return None
        flight = Flight(0, now)
        flight.rid = self.table.start(lane, now, lambda: flight.first_at)
        self._open[flight.rid] = flight
        return flight

    def get(self, rid: object) -> Flight | None:
        """The flight of id `rid` while under way; None otherwise (or for anything not an id)."""
        return self._open.get(rid) if isinstance(rid, int) else None

    @staticmethod
    def first_token(flight: Flight, now: float) -> None:
        """The request's first content chunk came at `now` (the first call counts)."""
        if flight.first_at is None:
            flight.first_at = now

    def end(self, flight: Flight) -> None:
        """The request ended: leave the table (once; its first token is still reported)."""
        if self._open.pop(flight.rid, None) is not None:
            self.table.end(flight.rid)

    def _expire(self, now: float) -> None:
        horizon = now - self._max_age
        while self._open:
            rid, oldest = next(iter(self._open.items()))
            if oldest.t0 >= horizon:
                return
            del self._open[rid]
            self.table.end(rid)
            self.expired += 1


_TEXT_KEYS = ("content", "reasoning_content", "reasoning")  # as the gateway's stream scan counts text


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def has_content(chunk: Any) -> bool:
    """Whether a streamed chunk (LiteLLM's object or a dict) carries answer text: a chat delta's
    content or reasoning, or a completion's text. A raw SSE chunk (text or bytes) counts if not empty."""
    if isinstance(chunk, str | bytes):
        return bool(chunk.strip())
    choices = _field(chunk, "choices")
    if not isinstance(choices, list | tuple):
        return False
    for choice in choices:
        delta = _field(choice, "delta")
        texts = [_field(delta, k) for k in _TEXT_KEYS] if delta is not None else []
        texts.append(_field(choice, "text"))
        if any(isinstance(t, str) and t for t in texts):
            return True
    return False
