"""The series budget: how many series one exporter's request metrics may expose, in each family and in all.

A series is one sample line of the exposition, as Prometheus counts them: a counter's label
set is one, a histogram's is its buckets plus `+Inf`, `_count` and `_sum`. Each family
asks `admit` before it adds a label set; one that does not fit folds its free-form labels
(target, request class, model) into OVERFLOW_VALUE, so its observations still count
somewhere, and `folded` says how many went there per family.

The lane never folds: it is a closed set (the exporter maps a lane it does not know to
`other`), and every SLO and alert selects by it, so a folded failure still counts against
its lane. Each known lane has a reserve of the budget no other lane can take: a client
filling one lane with class or model names folds its own lane's new label sets first and
leaves the other lanes theirs. What is not reserved is shared, first come. The overflow
label sets themselves are never refused: lane and their other labels (source, phase, error
kind, token type) are closed sets, so they are few. Pure and not thread-safe: the caller
holds its lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from lanewatch.exporters import names

__all__ = ["FOLDED_LABELS", "FREE_LABELS", "LabelCap", "SeriesBudget", "fold", "is_overflow"]

# The labels a client or a config chooses freely, in REQUEST_LABELS order (the rest are closed sets).
FREE_LABELS = (names.TARGET, names.LANE, names.REQUEST_CLASS, names.MODEL)
_FREE = len(FREE_LABELS)
assert names.REQUEST_LABELS[:_FREE] == FREE_LABELS  # fold() relies on the order
_LANE = FREE_LABELS.index(names.LANE)
# The labels fold() replaces: every free one but the lane.
FOLDED_LABELS = tuple(label for label in FREE_LABELS if label != names.LANE)
# Half the budget is reserved, split among the known lanes; the other half is shared.
RESERVED_SHARE = 0.5


class SeriesBudget:
    """Series counted per family and in all, against `max_per_family` and `max_series`, with a
    reserve per known lane."""

    def __init__(self, max_series: int, max_per_family: int, lanes: Collection[str] = ()) -> None:
        self.max_series = max_series
        self.max_per_family = max_per_family
        self.lanes = frozenset(lanes)
        self.total = 0
        self.families: Counter[str] = Counter()
        self.folded: Counter[str] = Counter()  # observations folded into overflow, per family
        n = len(self.lanes)
        self.reserve_series = int(max_series * RESERVED_SHARE / n) if n else 0
        self.reserve_per_family = int(max_per_family * RESERVED_SHARE / n) if n else 0
        self._lane_total: Counter[str] = Counter()  # series counted in each lane's reserve
        self._lane_family: Counter[tuple[str, str]] = Counter()
        self._shared_total = 0  # series counted in the shared part
        self._shared_family: Counter[str] = Counter()

    def admit(self, family: str, cost: int, lane: str | None = None) -> bool:
        """Count `cost` new series of `family` (in `lane`) when they fit; False (nothing counted) if not.

        A known lane's series go to its reserve while that has room, then to the shared part.
        """
        if lane in self.lanes and self._fits_reserve(family, cost, lane):
            self._lane_family[(family, lane)] += cost
            self._lane_total[lane] += cost
        elif self._fits_shared(family, cost):
            self._shared_family[family] += cost
            self._shared_total += cost
        else:
            return False
        self.families[family] += cost
        self.total += cost
        return True

    def _fits_reserve(self, family: str, cost: int, lane: str) -> bool:
        return (
            self._lane_family[(family, lane)] + cost <= self.reserve_per_family
            and self._lane_total[lane] + cost <= self.reserve_series
        )

    def _fits_shared(self, family: str, cost: int) -> bool:
        n = len(self.lanes)
        shared_family = self.max_per_family - n * self.reserve_per_family
        shared_total = self.max_series - n * self.reserve_series
        return (
            self._shared_family[family] + cost <= shared_family and self._shared_total + cost <= shared_total
        )

    def add_overflow(self, family: str, cost: int) -> None:
        """Count an overflow label set's series: outside the budget, since those are few."""
        self.families[family] += cost
        self.total += cost


def fold(labels: tuple[str, ...]) -> tuple[str, ...]:
    """The label values with the free-form ones but the lane as OVERFLOW_VALUE (REQUEST_LABELS order)."""
    over = names.OVERFLOW_VALUE
    return tuple(v if i == _LANE else over for i, v in enumerate(labels[:_FREE])) + labels[_FREE:]


def is_overflow(labels: tuple[str, ...]) -> bool:
    """True for a label set that fold() produced."""
    return all(v == names.OVERFLOW_VALUE for i, v in enumerate(labels[:_FREE]) if i != _LANE)


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
