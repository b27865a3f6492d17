"""Which waiting span a full join store gives up: the largest sender's largest call, its oldest; pure.

Spans are counted per sender (the peer's host and the resource's service.name) and, within a
sender, per call. The store gives up a span of the sender holding the most, and of that
sender's call holding the most: a flood pushes out its own spans however it is cut into
calls or senders' calls, before vLLM's batch (another sender) and before the few spans of a
sender's other calls.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Hashable

__all__ = ["FairGroups", "SizeHeap"]


class SizeHeap:
    """Counts per key, with the key counting most found in O(log n) (stale heap entries skipped)."""

    def __init__(self) -> None:
        self.sizes: dict[Hashable, int] = {}
        self._order: dict[Hashable, int] = {}  # key -> first-seen number: ties go to the older key
        self._heap: list[tuple[int, int, Hashable]] = []
        self._next = 0

    def add(self, key: Hashable, by: int) -> None:
        """Change a key's count by `by`; a key at zero is forgotten."""
        size = self.sizes.get(key, 0) + by
        if size <= 0:
            self.sizes.pop(key, None)
            self._order.pop(key, None)
            return
        self.sizes[key] = size
        if key not in self._order:
            self._next += 1
            self._order[key] = self._next
        heapq.heappush(self._heap, (-size, self._order[key], key))
        if len(self._heap) > 4 * len(self.sizes) + 64:  # drop the stale entries now and then
            self._heap = [(-n, self._order[k], k) for k, n in self.sizes.items()]
            heapq.heapify(self._heap)

    def largest(self) -> Hashable | None:
        """The key counting most; None when empty."""
        while self._heap:
            neg, _, key = self._heap[0]
            if self.sizes.get(key, 0) == -neg:
                return key
            heapq.heappop(self._heap)  # stale: the key changed count since
        return None


class FairGroups:
    """Item numbers by (sender, call), oldest first, and the one to give up when full."""

    def __init__(self) -> None:
        self._senders = SizeHeap()
        self._calls: dict[Hashable, SizeHeap] = {}
        self._seqs: dict[tuple[Hashable, Hashable], deque[int]] = {}

    def add(self, seq: int, sender: Hashable, call: Hashable) -> None:
        """Count item `seq` (newer than every one added before) under its sender and call."""
        self._seqs.setdefault((sender, call), deque()).append(seq)
        self._senders.add(sender, 1)
        self._calls.setdefault(sender, SizeHeap()).add(call, 1)

    def remove(self, sender: Hashable, call: Hashable) -> None:
        """Uncount one item of this sender and call (its number is skipped lazily)."""
        self._senders.add(sender, -1)
        calls = self._calls[sender]
        calls.add(call, -1)
        if call not in calls.sizes:
            self._seqs.pop((sender, call), None)
        if not calls.sizes:
            del self._calls[sender]

    def victim(self, alive: Callable[[int], bool]) -> int | None:
        """The oldest live item of the largest sender's largest call; None when empty."""
        sender = self._senders.largest()
        if sender is None:
            return None
        call = self._calls[sender].largest()
        seqs = self._seqs[(sender, call)]
        while not alive(seqs[0]):
            seqs.popleft()  # taken or expired earlier
        return seqs[0]
