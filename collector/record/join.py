"""Joins request records to vLLM's spans by W3C trace id; pure, time passed in.

A record that may have a span (a trace id and an HTTP 200) waits up to `wait_s` for
it; a span waits as long for its record, since either may arrive first. Both queues
are bounded by `max_pending`. When the records are full the oldest leaves, unjoined. When
the spans are full, the one that leaves (as an orphan) is the oldest of the group holding
the most waiting spans (a group is one POST /v1/traces): a flood of spans pushes out its
own before the few spans a record is waiting for. Several requests may share one trace
(a client that makes calls in one trace): they match by request id when it agrees, else
in order.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
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
    """Items waiting, oldest first, findable by trace id; at most `limit`.

    With `fair`, a full store evicts from the group that holds the most items, else the oldest.
    """

    def __init__(self, limit: int, fair: bool = False) -> None:
        self.limit = limit
        self.fair = fair
        self._seq = 0
        self._items: OrderedDict[int, tuple[float, T, int]] = OrderedDict()  # seq -> (deadline, item, group)
        self._by_trace: dict[str, list[int]] = {}
        self._groups: dict[int, deque[int]] = {}  # group -> its seqs, oldest first (removed ones skipped)
        self._sizes: dict[int, int] = {}
        self._largest: list[tuple[int, int]] = []  # heap of (-size, group); stale entries skipped

    def __len__(self) -> int:
        return len(self._items)

    def push(self, trace_id: str, item: T, deadline: float, group: int = 0) -> T | None:
        """Add an item; return the one the bound pushed out, if any."""
        evicted = None
        if len(self._items) >= self.limit:
            evicted = self._pop_fair() if self.fair else self.pop_oldest()
        self._seq += 1
        self._items[self._seq] = (deadline, item, group)
        self._by_trace.setdefault(trace_id, []).append(self._seq)
        if self.fair:
            self._groups.setdefault(group, deque()).append(self._seq)
            self._resize(group, 1)
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
            seq, (deadline, item, _) = next(iter(self._items.items()))
            if deadline > now:
                break
            out.append(self._remove(_trace_of(item), seq))
        return out

    def next_deadline(self) -> float | None:
        """When the oldest item expires; None when empty."""
        return next(iter(self._items.values()))[0] if self._items else None

    def _pop_fair(self) -> T | None:
        """Remove and return the oldest item of the largest group."""
        while self._largest:
            neg, group = self._largest[0]
            if self._sizes.get(group, 0) != -neg:
                heapq.heappop(self._largest)  # stale: the group changed size since
                continue
            seqs = self._groups[group]
            while seqs[0] not in self._items:
                seqs.popleft()  # taken or expired earlier
            seq = seqs[0]
            return self._remove(_trace_of(self._items[seq][1]), seq)
        return self.pop_oldest()

    def _resize(self, group: int, by: int) -> None:
        size = self._sizes.get(group, 0) + by
        if size <= 0:
            self._sizes.pop(group, None)
            self._groups.pop(group, None)
            return
        self._sizes[group] = size
        heapq.heappush(self._largest, (-size, group))
        if len(self._largest) > 4 * len(self._sizes) + 64:  # drop the stale entries now and then
            self._largest = [(-n, g) for g, n in self._sizes.items()]
            heapq.heapify(self._largest)

    def _remove(self, trace_id: str, seq: int) -> T:
        _, item, group = self._items.pop(seq)
        seqs = self._by_trace[trace_id]
        seqs.remove(seq)
        if not seqs:
            del self._by_trace[trace_id]
        if self.fair:
            self._resize(group, -1)
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
        self._spans: _Pending[ServerSpan] = _Pending(max_pending, fair=True)

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

    def add_span(self, span: ServerSpan, now: float, group: int = 0) -> list[RequestTiming]:
        """Take a span: the record it completes if one waits, else the span waits (`group`: its POST)."""
        ready = self.expire(now)
        self.stats.spans_received += 1
        record = self._records.take(span.trace_id, span.request_id)
        if record is not None:
            self.stats.spans_joined += 1
            return [*ready, joined(record, span)]
        if self._spans.push(span.trace_id, span, now + self.wait_s, group) is not None:
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
