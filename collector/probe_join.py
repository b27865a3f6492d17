"""The prober's span join: join.py's Joiner, with records let out in the order they were probed.

A record leaves once it is joined or its wait ran out, and only after every record probed
before it has left, so `lanewatch probe --json` prints one line per request in order while
the probes themselves never wait. Pure: time is passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from lanewatch.collector.join import Joiner, JoinStats
from lanewatch.collector.otlp import ServerSpan
from lanewatch.collector.timing import RequestTiming


class OrderedJoin:
    """Pairs records with spans by trace id; every method returns the records now free to go, in order."""

    def __init__(self, wait_s: float, max_pending: int = 10_000) -> None:
        self._joiner = Joiner(wait_s, max_pending)
        self._order: deque[str] = deque()  # keys of records not yet let out, oldest first
        self._ready: dict[str, RequestTiming] = {}
        self._seq = 0

    def add_record(self, record: RequestTiming, now: float) -> list[RequestTiming]:
        """Take a probe's record; it leaves when joined or its wait runs out."""
        self._seq += 1
        # A probe's trace id is its own (a new root span per probe); without one, a sequence key.
        key = record.trace_id or f"#{self._seq}"
        self._order.append(key)
        if record.trace_id is None:
            self._ready[key] = record
        return self._settle(self._joiner.add_record(record, now))

    def add_spans(self, spans: Iterable[ServerSpan], now: float) -> list[RequestTiming]:
        """Take spans from the receiver."""
        ready = []
        for span in spans:
            ready += self._joiner.add_span(span, now)
        return self._settle(ready)

    def expire(self, now: float) -> list[RequestTiming]:
        """Let out records whose wait ran out (and those queued behind them)."""
        return self._settle(self._joiner.expire(now))

    def flush(self) -> list[RequestTiming]:
        """Every record still held, joined or not (at the end)."""
        return self._settle(self._joiner.flush())

    def next_deadline(self) -> float | None:
        """When `expire` next has something to do."""
        return self._joiner.next_deadline()

    @property
    def held(self) -> int:
        """Records not yet let out."""
        return len(self._order)

    @property
    def stats(self) -> JoinStats:
        """The join's counters."""
        return self._joiner.stats

    def _settle(self, ready: list[RequestTiming]) -> list[RequestTiming]:
        for record in ready:
            if record.trace_id is not None:
                self._ready[record.trace_id] = record
        out = []
        while self._order and self._order[0] in self._ready:
            out.append(self._ready.pop(self._order.popleft()))
        return out
