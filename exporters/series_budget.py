"""The series budget: how many series one exporter's request metrics may expose, in each family and in all.

A series is one sample line of the exposition, as Prometheus counts them: a counter's label
set is one, a histogram's is its buckets plus `+Inf`, `_count` and `_sum`. Each family
asks `admit` before it adds a label set; one that does not fit folds its free-form labels
(target, lane, request class, model) into OVERFLOW_VALUE, so its observations still count
somewhere, and `folded` says how many went there per family. The overflow label sets
themselves are never refused: their other labels (source, phase, error kind, token type)
are closed sets, so they are few. Pure and not thread-safe: the caller holds its lock.
"""

from __future__ import annotations

from collections import Counter

from lanewatch.exporters import names

__all__ = ["FREE_LABELS", "LabelCap", "SeriesBudget", "fold", "is_overflow"]

# The labels a client or a config chooses freely, in REQUEST_LABELS order (the rest are closed sets).
FREE_LABELS = (names.TARGET, names.LANE, names.REQUEST_CLASS, names.MODEL)
_FREE = len(FREE_LABELS)
assert names.REQUEST_LABELS[:_FREE] == FREE_LABELS  # fold() relies on the order


class SeriesBudget:
    """Series counted per family and in all, against `max_per_family` and `max_series`."""

    def __init__(self, max_series: int, max_per_family: int) -> None:
        self.max_series = max_series
        self.max_per_family = max_per_family
        self.total = 0
        self.families: Counter[str] = Counter()
        self.folded: Counter[str] = Counter()  # observations folded into overflow, per family

    def admit(self, family: str, cost: int) -> bool:
        """Count `cost` new series of `family` when they fit both budgets; False (nothing counted) if not."""
        used = self.families[family]
        if used + cost > self.max_per_family or self.total + cost > self.max_series:
            return False
        self.families[family] = used + cost
        self.total += cost
        return True

    def add_overflow(self, family: str, cost: int) -> None:
        """Count an overflow label set's series: outside the budget, since those are few."""
        self.families[family] += cost
        self.total += cost


def fold(labels: tuple[str, ...]) -> tuple[str, ...]:
    """The label values with the free-form ones replaced by OVERFLOW_VALUE (REQUEST_LABELS order)."""
    return (names.OVERFLOW_VALUE,) * _FREE + labels[_FREE:]


def is_overflow(labels: tuple[str, ...]) -> bool:
    """True for a label set that fold() produced."""
    return labels[:_FREE] == (names.OVERFLOW_VALUE,) * _FREE


class LabelCap:
    """At most `max_values` distinct values per label; later new values become OVERFLOW_VALUE."""

    def __init__(self, max_values: int) -> None:
        self.max_values = max_values
        self._seen: dict[str, set[str]] = {}

    def value(self, label: str, value: str) -> str:
        """The value to expose for `label`."""
        seen = self._seen.setdefault(label, set())
        if value in seen:
            return value
        if len(seen) >= self.max_values:
            return names.OVERFLOW_VALUE
        seen.add(value)
        return value
