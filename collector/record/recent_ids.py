"""The ids of records taken lately, bounded, so a batch sent again is acknowledged, not taken twice; pure."""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["RecentIds"]


class RecentIds:
    """At most `limit` ids, the newest kept; 0 remembers none."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._ids: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._ids

    def add(self, record_id: str) -> None:
        """Remember an id taken now; the oldest goes when the bound is reached."""
        if self.limit <= 0:
            return
        self._ids[record_id] = None
        self._ids.move_to_end(record_id)
        while len(self._ids) > self.limit:
            self._ids.popitem(last=False)
