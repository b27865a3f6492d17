"""When the tap's record shipper sends, what a batch holds, and what a failed send leaves; pure.

The queue is a `deque(maxlen=...)` the data path appends to (the deque drops the oldest
record itself when full). A batch is taken from the oldest end; after a failed send its
records go back to that end, so "drop the oldest" still holds while the collector is away.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from typing import Literal, TypeVar

__all__ = ["Verdict", "backoff_s", "due", "refused_in", "requeue", "take", "verdict"]

T = TypeVar("T")
Verdict = Literal["sent", "retry", "rejected"]
# Statuses worth sending the same batch again for: the collector may answer later.
_RETRY_STATUSES = frozenset({408, 425, 429})


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
    if status is None or status >= 500 or status in _RETRY_STATUSES:
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
