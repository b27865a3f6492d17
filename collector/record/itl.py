"""A record's inter-token gaps, bounded: every gap while there are few, else an even sample and exact totals.

A stream of a million tiny events would otherwise put a million gaps on one record (a 5 MB
records line, and the window holding it for minutes). Up to MAX_ITL_SAMPLES gaps a record
keeps them all, and every statistic over them is exact. Past that it keeps every 2^k-th gap
(the sample stays spread evenly over the stream, at most MAX_ITL_SAMPLES of them) and
`ItlStats`: the exact count, sum, min and max of all the gaps. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lanewatch.collector.record.rules import RecordError

__all__ = ["MAX_ITL_SAMPLES", "GapSampler", "ItlStats", "bounded_gaps"]

MAX_ITL_SAMPLES = 1024  # gaps kept on one record
_INF = float("inf")
_KEYS = ("count", "sum_s", "min_s", "max_s")


@dataclass(frozen=True, slots=True)
class ItlStats:
    """Exact totals over every gap of a record whose `itl_s` holds only a sample of them."""

    count: int
    sum_s: float
    min_s: float
    max_s: float

    def __post_init__(self) -> None:
        """Refuse totals no reader could use (the field is named as on the records line)."""
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise RecordError("itl_stats.count", "not a non-negative whole number")
        for name in ("sum_s", "min_s", "max_s"):
            if not (0.0 <= getattr(self, name) < _INF):  # NaN fails every comparison
                raise RecordError(f"itl_stats.{name}", "not a finite, non-negative number of seconds")
        if self.min_s > self.max_s:
            raise RecordError("itl_stats.min_s", "larger than max_s")

    @property
    def mean_s(self) -> float:
        """The mean gap (0 for no gaps)."""
        return self.sum_s / self.count if self.count else 0.0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ItlStats:
        """Totals from a records line's `itl_stats` object; unknown keys are ignored."""
        missing = next((k for k in _KEYS if k not in data), None)
        if missing is not None:
            raise RecordError(f"itl_stats.{missing}", "missing")
        return cls(*(data[k] for k in _KEYS))

    def to_json(self) -> dict[str, float | int]:
        """The totals as they appear under `itl_stats` on a records line."""
        return {"count": self.count, "sum_s": self.sum_s, "min_s": self.min_s, "max_s": self.max_s}


Gaps = tuple[tuple[float, ...], ItlStats | None]  # a record's itl_s and itl_stats


class GapSampler:
    """Takes gaps in batches (`take`), keeps an evenly spaced sample of at most `cap`, and exact totals."""

    __slots__ = ("_cap", "_count", "_kept", "_max", "_min", "_stride", "_sum")

    def __init__(self, cap: int = MAX_ITL_SAMPLES) -> None:
        self._cap = cap
        self._kept: list[float] = []
        self._stride = 1  # the sample holds gaps 0, stride, 2 × stride, ...
        self._count = 0
        self._sum = 0.0
        self._min = _INF
        self._max = 0.0

    def take(self, gaps: list[float]) -> None:
        """Fold `gaps` (the next ones of the stream) in, and empty the list."""
        if not gaps:
            return
        self._kept.extend(gaps[(-self._count) % self._stride :: self._stride])
        self._count += len(gaps)
        self._sum += math.fsum(gaps)
        self._min = min(self._min, min(gaps))
        self._max = max(self._max, max(gaps))
        while len(self._kept) > self._cap:
            self._kept = self._kept[::2]  # gaps 0, 2 × stride, ...: still spread evenly
            self._stride *= 2
        gaps.clear()

    def result(self, last: list[float]) -> Gaps:
        """The gaps to put on the record and, when they are a sample, the exact totals; `last` folded in."""
        if self._count == 0 and len(last) <= self._cap:
            return tuple(last), None
        self.take(last)
        if self._stride == 1:
            return tuple(self._kept), None
        return tuple(self._kept), ItlStats(self._count, self._sum, self._min, self._max)


def bounded_gaps(gaps: Sequence[float], cap: int = MAX_ITL_SAMPLES) -> Gaps:
    """`gaps` as a record keeps them: all of them up to `cap`, else an even sample and the totals."""
    return GapSampler(cap).result(list(gaps))
