"""What every sender of records to the collector's `POST /v1/records` does with them; pure.

One bounded queue the data path appends to (full: the oldest record goes, counted), batches of
the oldest records bounded by count and by bytes, and what each answer means: sent (2xx, less the
records the collector names as refused), retry (no answer, 5xx, 408, 425, 429: the batch goes back
to the oldest end, so "drop the oldest" still holds while the collector is away) or rejected (any
other status: the batch is dropped, counted). Each record goes with a `record_id`, a digest of its
own JSON (record/batch.py), so a batch sent again after an answer was lost is taken once.

The gateway's shipper (an asyncio task) and the LiteLLM handler's (a thread) run this one core;
they differ only in how they wait, post and hand the event loop back while a batch encodes.
"""

from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from .batch import encode_batch, encode_record
from .timing import RequestTiming

__all__ = [
    "DEFAULT_BATCH_BYTES",
    "ENCODE_SLICE",
    "RECORDS_PATH",
    "RETRY_STATUSES",
    "Batch",
    "Outcome",
    "ShipQueue",
    "ShipStats",
    "Verdict",
    "backoff_s",
    "due",
    "refused_in",
    "requeue",
    "take",
    "verdict",
]

T = TypeVar("T")
Verdict = Literal["sent", "retry", "rejected"]
RECORDS_PATH = "/v1/records"  # the collector's (collector/collect/records_http.py)
# Statuses worth sending the same batch again for: the collector may answer later.
RETRY_STATUSES = frozenset({408, 425, 429})
ENCODE_SLICE = 8  # records encoded between the sender's pauses: about 0.25 ms of JSON at a time
DEFAULT_BATCH_BYTES = 1024 * 1024  # a batch's JSON at most: well under the collector's body limit


def due(queued: int, since_send_s: float, batch_records: int, interval_s: float) -> bool:
    """A batch goes out once enough records wait, or some wait and the interval has passed."""
    return queued >= batch_records or (queued > 0 and since_send_s >= interval_s)


def take(queue: deque[T], n: int) -> list[T]:
    """Remove and return up to `n` of the oldest items."""
    return [queue.popleft() for _ in range(min(n, len(queue)))]


def requeue(queue: deque[T], items: Sequence[T]) -> int:
    """Put `items` (older than everything queued) back at the oldest end; returns how many did not fit.

    What does not fit is the oldest of `items`: the bound keeps the newest records.
    """
    room = (queue.maxlen if queue.maxlen is not None else len(queue) + len(items)) - len(queue)
    keep = items[max(len(items) - room, 0) :] if room > 0 else []
    queue.extendleft(reversed(keep))
    return len(items) - len(keep)


def verdict(status: int | None) -> Verdict:
    """What a send's outcome means: None (no answer), 5xx, 408/425/429 retry; other non-2xx reject."""
    if status is not None and 200 <= status < 300:
        return "sent"
    if status is None or status >= 500 or status in RETRY_STATUSES:
        return "retry"
    return "rejected"


def backoff_s(failures: int, initial_s: float, max_s: float) -> float:
    """The wait after `failures` failed sends in a row (>= 1): doubling from `initial_s`, capped."""
    return min(max_s, initial_s * 2.0 ** min(max(failures - 1, 0), 30))


def refused_in(answer: bytes, sent: int) -> tuple[int, str]:
    """How many of the `sent` records a 2xx answer says the collector refused, and the first reason.

    `{"accepted": n, "refused": [{"index", "field", "reason"}, ...], "refused_count": m}`; an
    answer without `refused_count` (an older collector took the batch whole) refuses none.
    """
    try:
        doc = json.loads(answer)
    except (ValueError, RecursionError):
        return 0, ""
    count = doc.get("refused_count") if isinstance(doc, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        return 0, ""
    listed = doc.get("refused")
    first = listed[0] if isinstance(listed, list) and listed and isinstance(listed[0], dict) else {}
    why = f"records[{first.get('index')}].{first.get('field')}: {first.get('reason')}" if first else ""
    return min(count, sent), why


@dataclass(slots=True)
class ShipStats:
    """Counters since start; the queue length is read live."""

    shipped: int = 0  # records the collector accepted
    send_failures: int = 0  # sends that got no answer or a status worth retrying
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> records
    queue: deque[RequestTiming] = field(default_factory=deque)
    sending: int = 0  # records of the batch on its way

    @property
    def queued(self) -> int:
        """Records not yet shipped: waiting, and on their way."""
        return len(self.queue) + self.sending


@dataclass(slots=True)
class Batch:
    """Records encoded for one send, and those past the batch's bytes that wait for the next."""

    records: list[RequestTiming] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    left: list[RequestTiming] = field(default_factory=list)
    size: int = 0

    def body(self) -> bytes:
        """The POST body (`{"records": [...]}`)."""
        return encode_batch(self.bodies)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one send's answer did: its verdict, and how many records the collector refused (and why)."""

    verdict: Verdict
    refused: int = 0
    why: str = ""


class ShipQueue:
    """The records waiting to ship, and the bookkeeping of each batch; not thread-safe (a threaded
    sender holds its lock around each call)."""

    def __init__(self, queue_records: int, batch_records: int, batch_bytes: int) -> None:
        self._queue: deque[RequestTiming] = deque(maxlen=queue_records)
        self._max = queue_records
        self.batch_records = batch_records
        self.batch_bytes = batch_bytes
        self.stats = ShipStats(queue=self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    def append(self, record: RequestTiming) -> bool:
        """Queue a record, the oldest dropped when full; True when a batch's worth now waits."""
        q = self._queue
        if len(q) == self._max:
            self.stats.dropped["queue_full"] += 1
        q.append(record)
        return len(q) == self.batch_records

    def take(self) -> list[RequestTiming]:
        """Remove the oldest records, a batch's count at most."""
        return take(self._queue, self.batch_records)

    def encode(self, records: list[RequestTiming]) -> Iterator[Batch | None]:
        """Encode `records` into a batch: None after every ENCODE_SLICE records (the sender's moment
        to let others run), the batch last. A record that cannot be encoded is dropped, counted;
        those past `batch_bytes` are the batch's `left`, for `put_back`."""
        batch = Batch()
        for i, record in enumerate(records):
            if i and i % ENCODE_SLICE == 0:
                yield None
            try:
                body = encode_record(record, with_id=True)
            except ValueError:  # a NaN or infinity: the collector would refuse the whole batch
                self.stats.dropped["unencodable"] += 1
                continue
            if batch.records and batch.size + len(body) > self.batch_bytes:
                batch.left = records[i:]
                break
            batch.records.append(record)
            batch.bodies.append(body)
            batch.size += len(body) + 1
        yield batch

    def put_back(self, records: Sequence[RequestTiming]) -> None:
        """Return records older than everything queued to the oldest end; what does not fit is dropped."""
        if records:
            self.stats.dropped["queue_full"] += requeue(self._queue, records)

    def settle(self, batch: Batch, status: int | None, answer: bytes) -> Outcome:
        """Account for the answer to `batch`: shipped less refused, dropped as rejected, or put back."""
        n = len(batch.records)
        outcome = verdict(status)
        if outcome == "sent":
            refused, why = refused_in(answer, n)
            if refused:
                self.stats.dropped["refused"] += refused
            self.stats.shipped += n - refused
            return Outcome("sent", refused, why)
        if outcome == "rejected":
            self.stats.dropped["rejected"] += n
            return Outcome("rejected")
        self.stats.send_failures += 1
        self.put_back(batch.records)
        return Outcome("retry")

    def drain(self, reason: str) -> int:
        """Drop everything queued, counted under `reason`; how many went."""
        n = len(self._queue)
        if n:
            self.stats.dropped[reason] += n
        self._queue.clear()
        return n
