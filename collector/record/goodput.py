"""Goodput: whether one request met every latency SLO of its lane and did not fail.

The definition of DistServe and of `vllm bench serve --goodput`: the share of requests that
meet all their SLO thresholds (TTFT, TPOT, end-to-end). Here the thresholds are the latency
SLOs of the SLO spec (alerts/slos.yaml by default), applied per request, so goodput needs
no joint distribution that separate histograms cannot give. Two rules of attribution:

- a request counts against the lane it was routed to (`routed_lane`), not the lane that
  served it: a shifted request is judged by the SLOs its user was promised;
- a failed request is a miss, except the error kinds the lane's availability SLO excludes
  (a client that left), which are not counted at all. A request the gateway shed never
  reaches a record; the rules add the gateway's shed counter to the misses.

Pure: no I/O; `from_spec` maps a loaded spec, `outcome` judges one record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from lanewatch.collector.record.error_kinds import metric_error_kind
from lanewatch.collector.record.timing import RequestTiming

if TYPE_CHECKING:  # the spec is read, never built here: analysis does not depend on the rules' code
    from lanewatch.alerts.model import Spec

__all__ = ["Bound", "Goodput", "Outcome", "Tally", "from_spec", "outcome", "routed_lane", "tally"]

Outcome = Literal["met", "missed", "failed"]
OUTCOMES: tuple[Outcome, ...] = ("met", "missed", "failed")


@dataclass(frozen=True, slots=True)
class Bound:
    """One latency SLO: `metric` at most `threshold_s` for requests whose labels match `selector`."""

    metric: str  # ttft | tpot | itl | e2e
    threshold_s: float
    selector: tuple[tuple[str, str], ...] = ()

    def applies(self, record: RequestTiming) -> bool:
        """True when the record's labels match the SLO's selector."""
        return all(str(getattr(record, label, "")) == value for label, value in self.selector)

    def met(self, record: RequestTiming) -> bool:
        """True when the record is within the bound (a metric the record lacks is not judged)."""
        if self.metric == "itl":  # an ITL SLO bounds every gap, so every gap must be within it
            totals = record.itl_totals  # its max is exact even when itl_s is a sample
            return totals is None or totals.max_s <= self.threshold_s
        value = {"ttft": record.ttft_s, "tpot": record.tpot_s, "e2e": record.e2e_s}.get(self.metric)
        return value is None or value <= self.threshold_s


@dataclass(frozen=True)
class Goodput:
    """The latency bounds and the uncounted error kinds of each lane."""

    bounds: Mapping[str, tuple[Bound, ...]] = field(default_factory=dict)
    excluded_errors: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def lanes(self) -> frozenset[str]:
        """Every lane the spec sets an SLO for."""
        return frozenset({*self.bounds, *self.excluded_errors})


def from_spec(spec: Spec) -> Goodput:
    """Each lane's latency SLOs and its availability SLO's excluded error kinds."""
    bounds: dict[str, list[Bound]] = {}
    excluded: dict[str, set[str]] = {}
    for slo in spec.slos:
        if slo.metric is not None and slo.threshold_s is not None:
            bounds.setdefault(slo.lane, []).append(Bound(slo.metric, slo.threshold_s, slo.selector))
        else:
            excluded.setdefault(slo.lane, set()).update(slo.exclude_error_kinds)
    return Goodput(
        bounds={lane: tuple(b) for lane, b in bounds.items()},
        excluded_errors={lane: frozenset(kinds) for lane, kinds in excluded.items()},
    )


def routed_lane(record: RequestTiming) -> str:
    """The lane the request was routed to: the gateway's `routed_lane`, else the lane it ran in."""
    return record.attrs.get("routed_lane") or record.lane


def outcome(goodput: Goodput, record: RequestTiming) -> Outcome | None:
    """met, missed (a latency SLO), failed (an error), or None for an error kind not counted."""
    lane = routed_lane(record)
    kind = metric_error_kind(record)
    if kind is not None:
        if kind in goodput.excluded_errors.get(lane, frozenset()):
            return None
        return "failed"
    bounds = goodput.bounds.get(lane, ())
    return "met" if all(b.met(record) for b in bounds if b.applies(record)) else "missed"


@dataclass
class Tally:
    """Outcomes counted; `ratio` is met over all counted (None when nothing was counted)."""

    met: int = 0
    missed: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        """Requests counted."""
        return self.met + self.missed + self.failed

    @property
    def ratio(self) -> float | None:
        """Goodput: the share of counted requests that met every SLO."""
        return self.met / self.total if self.total else None

    def add(self, result: Outcome | None) -> None:
        """Count one outcome (None: not counted)."""
        if result is not None:
            setattr(self, result, getattr(self, result) + 1)


def tally(goodput: Goodput, records: Iterable[RequestTiming]) -> dict[tuple[str, str], Tally]:
    """Outcomes per (routed lane, request class)."""
    out: dict[tuple[str, str], Tally] = {}
    for record in records:
        out.setdefault((routed_lane(record), record.request_class), Tally()).add(outcome(goodput, record))
    return out
