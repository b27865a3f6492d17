"""Joins request records to vLLM's spans by W3C trace id; pure, time passed in.

A record that may have a span (a trace id and an HTTP 200) waits up to `wait_s` for
it; a span waits as long for its record, since either may arrive first. Both queues
are bounded by `max_pending`. When the records are full the oldest leaves, unjoined. When
the spans are full, the one that leaves (as an orphan) is the oldest span of the largest call
of the sender holding the most (`ServerSpan.sender`: the peer's host and the resource's
service.name; collector/record/join_fairness.py). A flood pushes out its own spans, however it is cut
into calls, before the batch vLLM sent.

Several requests may share one trace: a client that makes calls in one trace, or one that
chose a trace id someone else uses. A record that names the span its request was sent
under (`span_id`: the parent-id of the traceparent the gateway sent upstream, fresh and
random per request) takes only the span whose parent is that span, so no other request in
the trace can hand it foreign times. A record without one (the prober's, whose trace ids are
its own, or an older gateway's) matches a span by request id when it agrees, else in order.

The join never raises: a span whose times no record may take is refused alone and counted
(`JoinStats.spans_refused`), and the record goes on unjoined.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from lanewatch.collector.record.evidence import ServerSpan, span_problem
from lanewatch.collector.record.join_fairness import FairGroups
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import RequestTiming

T = TypeVar("T", RequestTiming, ServerSpan)
# The reasons a span is refused, on lanewatch_otlp_spans_refused_total beside otlp_wire's `limit`:
# the span itself (bad times or counts), or its record could not take its times (the join's last check).
REFUSED_INVALID = "invalid"
REFUSED_JOIN = "join"


@dataclass(slots=True)
class JoinStats:
    """Counters of the join since start."""

    spans_received: int = 0
    spans_joined: int = 0
    orphan_spans: int = 0  # spans no record claimed in time (or pushed out by the bound)
    unjoined_records: int = 0  # records that waited and got no span
    # spans refused before the join (at the receivers) or by it, by reason (otlp.REFUSED_*)
    spans_refused: Counter[str] = field(default_factory=Counter)


class _Pending(Generic[T]):
    """Items waiting, oldest first, findable by trace id; at most `limit`.

    With `fair`, a full store gives up the oldest item of the largest sender's largest call
    (collector/record/join_fairness.py), else the oldest.
    """

    def __init__(self, limit: int, fair: bool = False) -> None:
        self.limit = limit
        self.fair = fair
        self._seq = 0
        # seq -> (deadline, item, (sender, call))
        self._items: OrderedDict[int, tuple[float, T, tuple[Hashable, Hashable]]] = OrderedDict()
        self._by_trace: dict[str, list[int]] = {}
        self._groups = FairGroups()

    def __len__(self) -> int:
        return len(self._items)

    def push(
        self, trace_id: str, item: T, deadline: float, sender: Hashable = "", call: Hashable = 0
    ) -> T | None:
        """Add an item; return the one the bound pushed out, if any."""
        evicted = None
        if len(self._items) >= self.limit:
            evicted = self._pop_fair() if self.fair else self.pop_oldest()
        self._seq += 1
        self._items[self._seq] = (deadline, item, (sender, call))
        self._by_trace.setdefault(trace_id, []).append(self._seq)
        if self.fair:
            self._groups.add(self._seq, sender, call)
        return evicted

    def take(self, trace_id: str, rank: Callable[[T], int]) -> T | None:
        """Remove and return this trace's item `rank` puts first (lowest; < 0: never), oldest on ties."""
        seqs = self._by_trace.get(trace_id)
        if not seqs:
            return None
        best, pick = -1, None
        for seq in seqs:
            r = rank(self._items[seq][1])
            if r >= 0 and (pick is None or r < best):
                best, pick = r, seq
        return None if pick is None else self._remove(trace_id, pick)

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
        """Remove and return the oldest item of the largest sender's largest call."""
        seq = self._groups.victim(self._items.__contains__)
        if seq is None:
            return self.pop_oldest()
        return self._remove(_trace_of(self._items[seq][1]), seq)

    def _remove(self, trace_id: str, seq: int) -> T:
        _, item, (sender, call) = self._items.pop(seq)
        seqs = self._by_trace[trace_id]
        seqs.remove(seq)
        if not seqs:
            del self._by_trace[trace_id]
        if self.fair:
            self._groups.remove(sender, call)
        return item


def _trace_of(item: RequestTiming | ServerSpan) -> str:
    return item.trace_id or ""


def _same_request(a: str | None, b: str | None) -> bool:
    """vLLM prefixes the client's request id (e.g. chatcmpl-<id>), so compare by suffix."""
    if not a or not b:
        return False
    return a.endswith(b) or b.endswith(a)


def match_rank(record: RequestTiming, span: ServerSpan) -> int:
    """How well a span fits a record of its trace: 0 proven by parent span, 1 by request id, 2 by order;
    -1 never (the record names its span and this span is not under it)."""
    if record.span_id is not None:
        return 0 if span.parent_span_id == record.span_id else -1
    return 1 if _same_request(record.request_id, span.request_id) else 2


def joined(record: RequestTiming, span: ServerSpan) -> RequestTiming | None:
    """The record carrying the span's server-side phases; None when the record refuses them.

    A record that counted no tokens (a router's access log sees bytes, not tokens) takes the
    span's prompt and completion counts too, as usage vLLM reported.
    """
    try:
        out = record.with_server_phases(span.queue_s, span.prefill_s, span.decode_s)
        if out.output_tokens is None and span.completion_tokens is not None:
            out = dataclasses.replace(out, output_tokens=span.completion_tokens, tokens_from_usage=True)
        if out.prompt_tokens is None and span.prompt_tokens is not None:
            out = dataclasses.replace(out, prompt_tokens=span.prompt_tokens)
        return out
    except RecordError:  # the receivers admit only good spans; this is the last line, not the check
        return None


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
        span = self._spans.take(record.trace_id, lambda s: match_rank(record, s))
        if span is not None:
            return [*ready, self._pair(record, span)]
        evicted = self._records.push(record.trace_id, record, now + self.wait_s)
        if evicted is not None:
            self.stats.unjoined_records += 1
            ready.append(evicted)
        return ready

    def add_span(self, span: ServerSpan, now: float, group: Hashable = 0) -> list[RequestTiming]:
        """Take a span: the record it completes if one waits, else the span waits.

        `group` is the call it came in (its sender is `span.sender`), for the fair bound. A span
        whose times no record may take is refused and counted; it never waits.
        """
        ready = self.expire(now)
        if span_problem(span) is not None:
            self.stats.spans_refused[REFUSED_INVALID] += 1
            return ready
        self.stats.spans_received += 1
        record = self._records.take(span.trace_id, lambda r: match_rank(r, span))
        if record is not None:
            return [*ready, self._pair(record, span)]
        if self._spans.push(span.trace_id, span, now + self.wait_s, span.sender, group) is not None:
            self.stats.orphan_spans += 1
        return ready

    def _pair(self, record: RequestTiming, span: ServerSpan) -> RequestTiming:
        """The joined record; the record unjoined (the span refused, counted) when it refuses the span."""
        out = joined(record, span)
        if out is None:
            self.stats.spans_refused[REFUSED_JOIN] += 1
            self.stats.unjoined_records += 1
            return record
        self.stats.spans_joined += 1
        return out

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
