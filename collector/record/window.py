"""Pure analysis over records: quantiles, flatness, the fixed + per-token fit, lane convergence.

`Window` keeps the records of the last `window_s` seconds (time passed in, never read
from a clock) and answers per (target, lane, request class) statistics. The free
functions work on plain sequences so the report and the exporters share them.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lanewatch.collector.record.timing import RequestTiming, breakdown

QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)
MAX_WINDOW_BYTES = 32 * 1024 * 1024  # what a window's records may hold, by record_bytes()
# Per-record values summarised by the window, by name (`itl` pools every gap: itl_summary).
METRICS: tuple[str, ...] = (
    "dns",
    "connect",
    "tls",
    "send",
    "ttfb",
    "ttft",
    "tpot",
    "e2e",
    "queue",
    "prefill",
    "decode",
)


@dataclass(frozen=True, slots=True)
class Summary:
    """Distribution of one value: count, mean and the usual quantiles."""

    count: int
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    min: float
    max: float

    def quantile(self, q: float) -> float:
        """The stored quantile q (one of QUANTILES)."""
        return {0.5: self.p50, 0.9: self.p90, 0.95: self.p95, 0.99: self.p99}[q]


@dataclass(frozen=True, slots=True)
class LinearFit:
    """e2e = fixed_s + per_token_s × output_tokens, by least squares."""

    fixed_s: float
    per_token_s: float
    fixed_share: float  # fixed_s / mean e2e: near 1 means latency ignores the work
    r2: float
    n: int


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of already-sorted values, interpolating linearly (numpy's default)."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(values: Iterable[float]) -> Summary | None:
    """Summary of the values; None when there are none."""
    xs = sorted(values)
    if not xs:
        return None
    p50, p90, p95, p99 = (quantile(xs, q) for q in QUANTILES)
    return Summary(len(xs), math.fsum(xs) / len(xs), p50, p90, p95, p99, xs[0], xs[-1])


def itl_summary(records: Iterable[RequestTiming]) -> Summary | None:
    """Every gap of the records pooled; exact, except quantiles where a record kept only a sample.

    A sampled record's gaps each stand for `count / len(itl_s)` gaps in the quantiles; count,
    mean, min and max come from its exact totals.
    """
    rs = [r for r in records if r.itl_s]
    if all(r.itl_stats is None for r in rs):
        return summarize(g for r in rs for g in r.itl_s)
    weighted = sorted((g, _weight(r)) for r in rs for g in r.itl_s)
    totals = [t for r in rs if (t := r.itl_totals) is not None]
    count = sum(t.count for t in totals)
    p50, p90, p95, p99 = (_weighted_quantile(weighted, q) for q in QUANTILES)
    mean = math.fsum(t.sum_s for t in totals) / count
    return Summary(
        count, mean, p50, p90, p95, p99, min(t.min_s for t in totals), max(t.max_s for t in totals)
    )


def _weight(r: RequestTiming) -> float:
    return r.itl_stats.count / len(r.itl_s) if r.itl_stats is not None else 1.0


def _weighted_quantile(pairs: Sequence[tuple[float, float]], q: float) -> float:
    """The smallest value whose cumulative weight reaches q of the total (pairs sorted by value)."""
    goal, running = q * math.fsum(w for _, w in pairs), 0.0
    for value, weight in pairs:
        running += weight
        if running >= goal:
            return value
    return pairs[-1][0]


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Population standard deviation over mean; None for fewer than two values or mean 0."""
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    if mean == 0:
        return None
    var = math.fsum((v - mean) ** 2 for v in values) / len(values)
    return math.sqrt(var) / mean


def fit_fixed_per_token(tokens: Sequence[float], e2e: Sequence[float]) -> LinearFit | None:
    """Least-squares e2e = fixed + per_token × tokens; None without two distinct token counts."""
    n = len(tokens)
    if n != len(e2e) or n < 2:
        return None
    mx, my = math.fsum(tokens) / n, math.fsum(e2e) / n
    # Deviations once, then products in C (map): a diagnosis fits every record of a file.
    dx = [x - mx for x in tokens]
    sxx = math.fsum(map(operator.mul, dx, dx))
    if sxx == 0:
        return None
    dy = [y - my for y in e2e]
    sxy = math.fsum(map(operator.mul, dx, dy))
    slope = sxy / sxx
    fixed = my - slope * mx
    syy = math.fsum(map(operator.mul, dy, dy))
    res = list(map(operator.sub, dy, map(slope.__mul__, dx)))  # y - fixed - slope x
    ss_res = math.fsum(map(operator.mul, res, res))
    r2 = 1.0 - ss_res / syy if syy > 0 else 1.0
    share = fixed / my if my > 0 else 0.0
    return LinearFit(fixed, slope, share, r2, n)


def flatness(mean_e2e_by_class: Mapping[str, float]) -> float | None:
    """CV of mean E2E across request classes: low means latency no longer depends on the work."""
    return coefficient_of_variation(list(mean_e2e_by_class.values()))


def convergence_ratio(fast_p99: float | None, slow_p99: float | None) -> float | None:
    """Fast-lane P99 over slow-lane P99: near 1 means routing stopped helping."""
    if fast_p99 is None or not slow_p99:
        return None
    return fast_p99 / slow_p99


def record_value(r: RequestTiming, metric: str) -> float | None:
    """The value of one METRICS name on a record."""
    if metric == "ttft":  # the serving lane's own: a rescued request's wait on a late lane is not its
        return r.own_ttft_s
    value = r.tpot_s if metric == "tpot" else getattr(r, f"{metric}_s")
    return None if value is None else float(value)


def record_bytes(r: RequestTiming) -> int:
    """About how much memory a record holds: a fixed part, its ITL gaps, its text and attrs."""
    text = len(r.prompt_text or "") + len(r.response_text or "")
    return 1024 + 32 * len(r.itl_s) + text + sum(len(k) + len(v) + 120 for k, v in r.attrs.items())


Key = tuple[str, str, str]  # (target, lane, request_class)


@dataclass(frozen=True, slots=True)
class GroupStats:
    """Statistics of one (target, lane, request class) over the window."""

    key: Key
    requests: int
    errors: int
    metrics: Mapping[str, Summary]  # METRICS names plus "itl"
    breakdown_mean: Mapping[str, float]  # mean of each breakdown part over ok records


class Window:
    """Records of the last `window_s` seconds, at most `max_records` and about `max_bytes`; time is passed in.

    The byte bound is an estimate of what the records hold (record_bytes), so a burst of big
    records (long ITL samples, kept content) drops the oldest ones early rather than grow the process.
    """

    def __init__(
        self, window_s: float = 300.0, max_records: int = 100_000, max_bytes: int | None = MAX_WINDOW_BYTES
    ) -> None:
        self.window_s = window_s
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.bytes = 0  # record_bytes() of the records held
        self._records: deque[tuple[float, RequestTiming, int]] = deque()

    def add(self, record: RequestTiming, now: float) -> None:
        """Add a record seen at `now` (any monotonic seconds, the same clock as `now` later)."""
        self._trim(now)  # also here: unscraped, the window would otherwise fill to max_records
        size = record_bytes(record)
        self._records.append((now, record, size))
        self.bytes += size
        limit = self.max_bytes
        while len(self._records) > self.max_records or (
            limit is not None and self.bytes > limit and len(self._records) > 1
        ):
            self.bytes -= self._records.popleft()[2]

    def records(self, now: float) -> list[RequestTiming]:
        """The records still inside the window at `now`."""
        self._trim(now)
        return [r for _, r, _ in self._records]

    def __len__(self) -> int:
        return len(self._records)

    def snapshot(self, now: float) -> Window:
        """A copy of the records inside the window at `now`, to summarise away from this one's owner."""
        self._trim(now)
        copy = Window(self.window_s, self.max_records, self.max_bytes)
        copy._records.extend(self._records)
        copy.bytes = self.bytes
        return copy

    @property
    def version(self) -> tuple[int, float | None]:
        """Changes whenever a record is added or leaves (its length and newest arrival)."""
        return len(self._records), self._records[-1][0] if self._records else None

    def _trim(self, now: float) -> None:
        horizon = now - self.window_s
        while self._records and self._records[0][0] < horizon:
            self.bytes -= self._records.popleft()[2]

    def groups(self, now: float) -> list[GroupStats]:
        """Per (target, lane, request class) statistics."""
        by_key: dict[Key, list[RequestTiming]] = {}
        for r in self.records(now):
            by_key.setdefault((r.target, r.lane, r.request_class), []).append(r)
        return [group_stats(key, rs) for key, rs in sorted(by_key.items())]

    def lane_p99_ttft(self, now: float) -> dict[str, float]:
        """P99 TTFT per lane over ok records."""
        by_lane: dict[str, list[float]] = {}
        for r in self.records(now):
            if r.ok and (own := r.own_ttft_s) is not None:
                by_lane.setdefault(r.lane, []).append(own)
            if r.ok and (late := r.late_ttft) is not None:  # a won rescue: the late lane's own wait
                by_lane.setdefault(late[0], []).append(late[1])
        return {lane: quantile(sorted(v), 0.99) for lane, v in by_lane.items()}

    def flatness_by_lane(self, now: float) -> dict[str, float]:
        """CV of mean E2E across request classes, per lane (lanes with two classes or more)."""
        sums: dict[str, dict[str, list[float]]] = {}
        for r in self.records(now):
            if r.ok and r.e2e_s is not None:
                sums.setdefault(r.lane, {}).setdefault(r.request_class, []).append(r.e2e_s)
        out = {}
        for lane, classes in sums.items():
            cv = flatness({c: math.fsum(v) / len(v) for c, v in classes.items()})
            if cv is not None:
                out[lane] = cv
        return out

    def fit_by_lane(self, now: float) -> dict[str, LinearFit]:
        """The fixed + per-token fit of E2E against output tokens, per lane."""
        points: dict[str, tuple[list[float], list[float]]] = {}
        for r in self.records(now):
            if r.ok and r.e2e_s is not None and r.output_tokens:
                xs, ys = points.setdefault(r.lane, ([], []))
                xs.append(float(r.output_tokens))
                ys.append(r.e2e_s)
        fits = {lane: fit_fixed_per_token(xs, ys) for lane, (xs, ys) in points.items()}
        return {lane: f for lane, f in fits.items() if f is not None}


def group_stats(key: Key, records: Sequence[RequestTiming]) -> GroupStats:
    """Statistics of one group of records."""
    ok = [r for r in records if r.ok]
    metrics: dict[str, Summary] = {}
    for name in METRICS:
        s = summarize(v for r in ok if (v := record_value(r, name)) is not None)
        if s is not None:
            metrics[name] = s
    itl = itl_summary(ok)
    if itl is not None:
        metrics["itl"] = itl
    parts: dict[str, list[float]] = {}
    for r in ok:
        for part, value in breakdown(r).items():
            parts.setdefault(part, []).append(value)
    means = {p: math.fsum(v) / len(v) for p, v in parts.items()}
    return GroupStats(key, len(records), len(records) - len(ok), metrics, means)
