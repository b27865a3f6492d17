"""Joins request records to vLLM's spans by W3C trace id; pure, time passed in.

A record that may have a span (a trace id and an HTTP 200) waits up to `wait_s` for
it; a span waits as long for its record, since either may arrive first. Both queues
are bounded by `max_pending`: when one is full its oldest entry leaves (a record
unjoined, a span as an orphan). Several requests may share one trace (a client that
makes calls in one trace): they match by request id when it agrees, else in order.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

from lanewatch.collector.collect.otlp import ServerSpan
from lanewatch.collector.record.timing import RequestTiming

T = TypeVar("T", RequestTiming, ServerSpan)


@dataclass(slots=True)
class JoinStats:
    """Counters of the join since start."""

    spans_received: int = 0
    spans_joined: int = 0
    orphan_spans: int = 0  # spans no record claimed in time (or pushed out by the bound)
    unjoined_records: int = 0  # records that waited and got no span


class _Pending(Generic[T]):
    """Items waiting, oldest first, findable by trace id; at most `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seq = 0
        self._items: OrderedDict[int, tuple[float, T]] = OrderedDict()
        self._by_trace: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def push(self, trace_id: str, item: T, deadline: float) -> T | None:
        """Add an item; return the oldest one when the bound pushed it out."""
        evicted = self.pop_oldest() if len(self._items) >= self.limit else None
        self._seq += 1
        self._items[self._seq] = (deadline, item)
        self._by_trace.setdefault(trace_id, []).append(self._seq)
        return evicted

    def take(self, trace_id: str, request_id: str | None) -> T | None:
        """Remove and return the item for this trace (the one whose request id agrees, else the oldest)."""
        seqs = self._by_trace.get(trace_id)
        if not seqs:
            return None
        pick = next((s for s in seqs if _same_request(self._items[s][1], request_id)), seqs[0])
        return self._remove(trace_id, pick)

    def pop_oldest(self) -> T | None:
        """Remove and return the oldest item."""
        if not self._items:
            return None
        seq = next(iter(self._items))
        return self._remove(_trace_of(self._items[seq][1]), seq)

    def pop_expired(self, now: float) -> list[T]:
        """Remove and return the items whose deadline has passed (deadlines grow with insertion)."""
        out = []
        while self._items:
            seq, (deadline, item) = next(iter(self._items.items()))
            if deadline > now:
                break
            out.append(self._remove(_trace_of(item), seq))
        return out

    def next_deadline(self) -> float | None:
        """When the oldest item expires; None when empty."""
        return next(iter(self._items.values()))[0] if self._items else None

    def _remove(self, trace_id: str, seq: int) -> T:
        _, item = self._items.pop(seq)
        seqs = self._by_trace[trace_id]
        seqs.remove(seq)
        if not seqs:
            del self._by_trace[trace_id]
        return item


def _trace_of(item: RequestTiming | ServerSpan) -> str:
    return item.trace_id or ""


def _same_request(item: RequestTiming | ServerSpan, request_id: str | None) -> bool:
    """vLLM prefixes the client's request id (e.g. chatcmpl-<id>), so compare by suffix."""
    other = item.request_id
    if not request_id or not other:
        return False
    return request_id.endswith(other) or other.endswith(request_id)


def joined(record: RequestTiming, span: ServerSpan) -> RequestTiming:
    """The record carrying the span's server-side phases."""
    return record.with_server_phases(span.queue_s, span.prefill_s, span.decode_s)


class Joiner:
    """Pairs records with spans by trace id; every method returns the records now ready."""

    def __init__(self, wait_s: float, max_pending: int) -> None:
        self.wait_s = wait_s
        self.stats = JoinStats()
        self._records: _Pending[RequestTiming] = _Pending(max_pending)
        self._spans: _Pending[ServerSpan] = _Pending(max_pending)

    @staticmethod
    def may_join(record: RequestTiming) -> bool:
        """A record waits only when a span can exist: a trace id, a 200, no phases yet."""
        # Phases the response reported still wait for the span, which replaces them.
        unjoined = not record.has_server_phases or record.phases_source == "response"
        return record.trace_id is not None and record.status == 200 and unjoined

    def add_record(self, record: RequestTiming, now: float) -> list[RequestTiming]:
        """Take a record: joined at once if its span waits, held if it may join, else passed on."""
        ready = self.expire(now)
        if not self.may_join(record) or record.trace_id is None:
            return [*ready, record]
        span = self._spans.take(record.trace_id, record.request_id)
        if span is not None:
            self.stats.spans_joined += 1
            return [*ready, joined(record, span)]
        evicted = self._records.push(record.trace_id, record, now + self.wait_s)
        if evicted is not None:
            self.stats.unjoined_records += 1
            ready.append(evicted)
        return ready

    def add_span(self, span: ServerSpan, now: float) -> list[RequestTiming]:
        """Take a span: the record it completes if one waits, else the span waits."""
        ready = self.expire(now)
        self.stats.spans_received += 1
        record = self._records.take(span.trace_id, span.request_id)
        if record is not None:
            self.stats.spans_joined += 1
            return [*ready, joined(record, span)]
        if self._spans.push(span.trace_id, span, now + self.wait_s) is not None:
            self.stats.orphan_spans += 1
        return ready

    def expire(self, now: float) -> list[RequestTiming]:
        """Records whose wait ran out (unjoined); spans past theirs are dropped as orphans."""
        self.stats.orphan_spans += len(self._spans.pop_expired(now))
        late = self._records.pop_expired(now)
        self.stats.unjoined_records += len(late)
        return late

    def flush(self) -> list[RequestTiming]:
        """Every waiting record, unjoined (at shutdown)."""
        out = []
        while (r := self._records.pop_oldest()) is not None:
            out.append(r)
        self.stats.unjoined_records += len(out)
        return out

    def next_deadline(self) -> float | None:
        """The earliest time `expire` has something to do."""
        times = [t for t in (self._records.next_deadline(), self._spans.next_deadline()) if t is not None]
        return min(times) if times else None

    @property
    def pending(self) -> tuple[int, int]:
        """(records waiting, spans waiting)."""
        return len(self._records), len(self._spans)
