"""The prober's span join: join.py's Joiner, with records let out in the order they were probed.

A record leaves once it is joined or its wait ran out, and only after every record probed
before it has left, so `lanewatch probe --json` prints one line per request in order while
the probes themselves never wait. `OrderedJoin` is pure (time is passed in); `LoopJoin` runs
it on an asyncio loop, with a timer for the next deadline and spans handed in from a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterable

from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.join import Joiner, JoinStats
from lanewatch.collector.record.timing import RequestTiming


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


class LoopJoin:
    """The probe's OrderedJoin on the probe's event loop: spans come in from the receiver's thread."""

    def __init__(self, join: OrderedJoin, emit: Callable[[RequestTiming], None]) -> None:
        self.join = join
        self._emit = emit
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._empty = asyncio.Event()
        self._empty.set()

    def add_record(self, record: RequestTiming) -> None:
        """A probe's record: out once joined or its wait ran out."""
        self._out(self.join.add_record(record, self._loop.time()))

    def spans_from_thread(self, spans: list[ServerSpan]) -> None:
        """Called on the receiver's thread: hand the decoded spans to the loop."""
        if spans:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the run is over
                self._loop.call_soon_threadsafe(self._add_spans, spans)

    async def drain(self) -> None:
        """Wait until every record is out, joined or not."""
        await self._empty.wait()

    def close(self) -> None:
        """Let out what is still held, unjoined, and stop the timer."""
        self._out(self.join.flush())
        if self._timer is not None:
            self._timer.cancel()

    def _add_spans(self, spans: list[ServerSpan]) -> None:
        self._out(self.join.add_spans(spans, self._loop.time()))

    def _expire(self) -> None:
        # The loop may run a timer up to its clock resolution early: expire as of the deadline.
        when = self._timer.when() if self._timer is not None else self._loop.time()
        self._timer = None
        self._out(self.join.expire(max(when, self._loop.time())))

    def _out(self, records: list[RequestTiming]) -> None:
        for record in records:
            self._emit(record)
        if self.join.held:
            self._empty.clear()
        else:
            self._empty.set()
        deadline = self.join.next_deadline()
        if self._timer is not None and self._timer.when() != deadline:
            self._timer.cancel()
            self._timer = None
        if deadline is not None and self._timer is None:
            self._timer = self._loop.call_at(deadline, self._expire)
