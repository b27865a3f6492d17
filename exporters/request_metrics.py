"""The request metrics: histograms and counters over every record, within a series budget.

`RequestMetrics` turns records into the histograms and counters every alert and dashboard
reads (names.py), keeps each family within the series budget (series_budget.py), and
renders its own exposition incrementally (exposition.py): only what changed since the last
scrape is written again.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from lanewatch.collector.record.error_kinds import metric_error_kind
from lanewatch.collector.record.goodput import Goodput, outcome, routed_lane
from lanewatch.collector.record.timing import RequestTiming, breakdown
from lanewatch.collector.record.window import METRICS, QUANTILES
from lanewatch.exporters import exposition, names
from lanewatch.exporters.series_budget import LabelCap, SeriesBudget, fold, is_overflow

__all__ = ["HISTOGRAMS", "LabelCap", "RequestMetrics"]

LabelValues = tuple[str, ...]


def _otel(name: str) -> str:
    other = names.OTEL_EQUIVALENT.get(name)
    return f" (OpenTelemetry GenAI: {other})" if other else ""


# name → (help, buckets, extra labels after REQUEST_LABELS)
HISTOGRAMS: dict[str, tuple[str, Sequence[float], tuple[str, ...]]] = {
    names.TTFT_SECONDS: ("Time to the first content-bearing chunk.", names.LATENCY_BUCKETS, ()),
    names.TPOT_SECONDS: (
        "Time per output token after the first: (e2e - ttft) / (tokens - 1).",
        names.LATENCY_BUCKETS,
        (),
    ),
    names.ITL_SECONDS: ("Gaps between content chunks, one sample per gap.", names.LATENCY_BUCKETS, ()),
    names.E2E_SECONDS: ("Request start to the end of the stream.", names.LATENCY_BUCKETS, ()),
    names.TTFB_SECONDS: ("Request start to the response headers.", names.LATENCY_BUCKETS, ()),
    names.PHASE_SECONDS: (
        "The stacked breakdown of e2e, one part per phase label.",
        names.LATENCY_BUCKETS,
        (names.PHASE,),
    ),
    names.OUTPUT_TOKENS: ("Output tokens per request.", names.TOKEN_BUCKETS, ()),
}


_LANE_AT = names.REQUEST_LABELS.index(names.LANE)


def _closed(value: str, known: frozenset[str] | None) -> str:
    """`value` when the set is open or holds it, else OTHER_VALUE."""
    return value if known is None or value in known else names.OTHER_VALUE


class _Histogram:
    __slots__ = ("counts", "total", "version")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * (buckets + 1)  # the last one is +Inf
        self.total = 0.0
        self.version = 0  # bumped per change: exposition() re-renders only what changed

    def observe(self, bounds: Sequence[float], value: float) -> None:
        self.counts[bisect.bisect_left(bounds, value)] += 1  # `le` is inclusive
        self.total += value
        self.version += 1

    def observe_many(self, bounds: Sequence[float], values: Iterable[float]) -> None:
        counts, find, total = self.counts, bisect.bisect_left, 0.0
        for value in values:  # one record's ITL gaps: dozens, on the gateway's request path
            counts[find(bounds, value)] += 1
            total += value
        self.total += total
        self.version += 1

    def observe_sample(
        self, bounds: Sequence[float], values: Sequence[float], count: int, total: float
    ) -> None:
        """A sample of `count` values summing to `total`: count and sum exact, buckets scaled from it."""
        counts, find = self.counts, bisect.bisect_left
        share, extra = divmod(
            count, len(values)
        )  # each value stands for `share` (the first `extra`, one more)
        for i, value in enumerate(values):
            counts[find(bounds, value)] += share + (i < extra)
        self.total += total
        self.version += 1

    def family_buckets(self, bounds: Sequence[float]) -> list[tuple[str, float]]:
        out, running = [], 0
        for bound, count in zip((*bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append((names.le(bound), float(running)))
        return out


class RequestMetrics(Collector):
    """Histograms and counters over every observed record; thread-safe; registry injected.

    `lanes` and `classes` close those labels: a lane or request class not listed is counted
    as `other` (None: open, bounded by the cap and the budget alone). Known lanes never fold
    and each has a reserve of the series budget (series_budget.py).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None,
        max_label_values: int = 200,
        goodput: Goodput | None = None,
        max_series: int = 10_000,
        max_series_per_family: int = 4_000,
        lanes: Collection[str] | None = None,
        classes: Collection[str] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._lanes = None if lanes is None else frozenset(lanes)
        self._classes = None if classes is None else frozenset(classes)
        self._cap = LabelCap(max_label_values)
        self._goodput = goodput  # None: no goodput counter
        self._judged: dict[LabelValues, float] = {}
        reserved = (self._lanes or frozenset()) - {names.OTHER_VALUE}  # unknown lanes get the shared part
        self._budget = SeriesBudget(max_series, max_series_per_family, reserved)
        self._groups: set[LabelValues] = set()  # window groups admitted (cap_group)
        # (family, labels) -> its exposition line prefixes; as bounded as the series (the budget)
        self._prefixes: dict[tuple[str, LabelValues], Any] = {}
        self._texts: dict[tuple[str, LabelValues], tuple[int, str]] = {}  # (version, lines) per histogram
        self._order: dict[str, list[LabelValues]] = {}  # each histogram family's label sets, sorted
        self._hists: dict[str, dict[LabelValues, _Histogram]] = {n: {} for n in HISTOGRAMS}
        self._requests: dict[LabelValues, float] = {}
        self._errors: dict[LabelValues, float] = {}
        self._tokens: dict[LabelValues, float] = {}
        # The counter families in exposition order: (name, help, extra labels, series).
        self._counters: list[tuple[str, str, tuple[str, ...], dict[LabelValues, float]]] = [
            (name, doc, extra, series)
            for (name, doc, extra), series in zip(
                _COUNTERS, (self._requests, self._errors, self._tokens), strict=True
            )
        ]
        if goodput is not None:
            self._counters.append(
                (names.GOODPUT_REQUESTS_TOTAL, _GOODPUT_HELP, (names.OUTCOME,), self._judged)
            )
        self._budgeted = (*_BUDGETED, *((names.GOODPUT_REQUESTS_TOTAL,) if goodput is not None else ()))
        if registry is not None:
            registry.register(self)

    def cap(self, record: RequestTiming) -> RequestTiming:
        """The record with its free-form label fields bounded: lane and class by their closed sets
        when configured (those need no cap), the others by the cardinality cap (source is closed)."""
        with self._lock:
            target = self._cap.value(names.TARGET, record.target)
            model = self._cap.value(names.MODEL, record.model)
            lane = self._bounded(names.LANE, record.lane, self._lanes)
            request_class = self._bounded(names.REQUEST_CLASS, record.request_class, self._classes)
        if (target, lane, request_class, model) == (
            record.target,
            record.lane,
            record.request_class,
            record.model,
        ):
            return record
        return dataclasses.replace(record, target=target, lane=lane, request_class=request_class, model=model)

    def _bounded(self, label: str, value: str, known: frozenset[str] | None) -> str:
        """A closed label's value (OTHER_VALUE outside its set), or an open one's through the cap."""
        return self._cap.value(label, value) if known is None else _closed(value, known)

    def cap_group(self, record: RequestTiming) -> RequestTiming:
        """`cap`, then the record's window group (target, lane, class) folded when the budget is spent."""
        record = self.cap(record)
        key = (record.target, record.lane, record.request_class)
        with self._lock:
            family = names.WINDOW_QUANTILE_SECONDS
            if key in self._groups or self._budget.admit(family, _GROUP_COST, record.lane):
                self._groups.add(key)
                return record
            self._budget.folded[family] += 1
        over = names.OVERFLOW_VALUE  # the lane stays: it is closed, and the lane's quantiles still count it
        return dataclasses.replace(record, target=over, request_class=over, model=over)

    def observe(self, record: RequestTiming) -> None:
        """Count a finished request; latency histograms take only requests that succeeded."""
        record = self.cap(record)
        labels = tuple(str(getattr(record, label)) for label in names.REQUEST_LABELS)
        with self._lock:
            self._inc(names.REQUESTS_TOTAL, self._requests, labels)
            kind = metric_error_kind(record)
            if kind is not None:
                self._inc(names.REQUEST_ERRORS_TOTAL, self._errors, (*labels, kind))
            if record.prompt_tokens:
                self._inc(names.TOKENS_TOTAL, self._tokens, (*labels, "input"), record.prompt_tokens)
            if record.output_tokens:
                self._inc(names.TOKENS_TOTAL, self._tokens, (*labels, "output"), record.output_tokens)
            if record.ok:
                self._observe_latencies(record, labels)
            if self._goodput is not None:
                self._judge(record, labels, self._goodput)

    def _judge(self, record: RequestTiming, labels: LabelValues, goodput: Goodput) -> None:
        result = outcome(goodput, record)
        if result is None:
            return
        lane = self._bounded(names.LANE, routed_lane(record), self._lanes)
        routed = tuple(
            lane if label == names.LANE else v for label, v in zip(names.REQUEST_LABELS, labels, strict=True)
        )
        self._inc(names.GOODPUT_REQUESTS_TOTAL, self._judged, (*routed, result))

    def _observe_latencies(self, r: RequestTiming, labels: LabelValues) -> None:
        single = {
            names.TTFT_SECONDS: r.ttft_s,
            names.TPOT_SECONDS: r.tpot_s,
            names.E2E_SECONDS: r.e2e_s,
            names.TTFB_SECONDS: r.ttfb_s,
            names.OUTPUT_TOKENS: r.output_tokens,
        }
        for name, value in single.items():
            if value is not None:
                self._hist(name, labels).observe(HISTOGRAMS[name][1], float(value))
        if r.itl_stats is not None:  # itl_s is a sample of a long stream's gaps (collector/record/itl.py)
            stats = r.itl_stats
            hist = self._hist(names.ITL_SECONDS, labels)
            hist.observe_sample(names.LATENCY_BUCKETS, r.itl_s, stats.count, stats.sum_s)
        elif r.itl_s:
            self._hist(names.ITL_SECONDS, labels).observe_many(names.LATENCY_BUCKETS, r.itl_s)
        for part, value in breakdown(r).items():
            self._hist(names.PHASE_SECONDS, (*labels, part)).observe(names.LATENCY_BUCKETS, value)

    def _hist(self, name: str, labels: LabelValues) -> _Histogram:
        series = self._hists[name]
        h = series.get(labels)
        if h is None:
            bounds = len(HISTOGRAMS[name][1])
            labels = self._within_budget(name, series, labels, bounds + 3)  # buckets, +Inf, count, sum
            h = series.get(labels)
            if h is None:
                h = series[labels] = _Histogram(bounds)
        return h

    def _inc(self, name: str, series: dict[LabelValues, float], labels: LabelValues, by: float = 1.0) -> None:
        if labels not in series:
            labels = self._within_budget(name, series, labels, 1)
        series[labels] = series.get(labels, 0.0) + by

    def _within_budget(
        self, family: str, series: Mapping[LabelValues, object], labels: LabelValues, cost: int
    ) -> LabelValues:
        """`labels` when they fit the series budget, else their overflow label set (the fold counted)."""
        if not is_overflow(labels) and self._budget.admit(family, cost, labels[_LANE_AT]):
            return labels
        over = fold(labels)
        self._budget.folded[family] += 1
        if over not in series:
            self._budget.add_overflow(family, cost)
        return over

    def collect(self) -> Iterator[Metric]:
        """Render every series, sorted by labels, from a consistent copy."""
        with self._lock:
            hists = {
                n: {k: (h.family_buckets(HISTOGRAMS[n][1]), h.total) for k, h in s.items()}
                for n, s in self._hists.items()
            }
            counters = [(name, doc, extra, dict(series)) for name, doc, extra, series in self._counters]
            folded = dict(self._budget.folded)
        for name, (doc, _, extra) in HISTOGRAMS.items():
            fam = HistogramMetricFamily(name, doc + _otel(name), labels=[*names.REQUEST_LABELS, *extra])
            for labels, (buckets, total) in sorted(hists[name].items()):
                fam.add_metric(list(labels), buckets, total)
            yield fam
        for name, doc, extra, series in counters:
            yield _counter(name, doc, extra, series)
        overflow = CounterMetricFamily(names.SERIES_OVERFLOW_TOTAL, _OVERFLOW_HELP, labels=[names.FAMILY])
        for family in self._budgeted:
            overflow.add_metric([family], folded.get(family, 0))
        yield overflow

    def exposition(self) -> str:
        """The same text as `generate_latest` over this collector alone, rendered incrementally.

        A histogram's lines are kept with the version they show and written again only when it
        changed; the lock is held to copy what changed, not to format it.
        """
        texts = self._texts
        with self._lock:
            changed = [
                (n, k, list(h.counts), h.total, h.version)
                for n, s in self._hists.items()
                for k, h in s.items()
                if texts.get((n, k), _NOT_RENDERED)[0] != h.version
            ]
            keys = {n: self._sorted_keys(n, s) for n, s in self._hists.items()}
            counters = [(name, doc, extra, dict(series)) for name, doc, extra, series in self._counters]
            folded = dict(self._budget.folded)
        for name, labels, counts, total, version in changed:
            texts[(name, labels)] = (version, self._histogram_text(name, labels, counts, total))
        out: list[str] = []
        cache = self._prefixes
        for name, (doc, _, _) in HISTOGRAMS.items():
            out.append(exposition.header(name, doc + _otel(name), "histogram"))
            out.extend(texts[(name, labels)][1] for labels in keys[name])
        for name, doc, extra, series in counters:
            out.append(exposition.header(name, doc + _otel(name), "counter"))
            labelnames = (*names.REQUEST_LABELS, *extra)
            for labels, value in sorted(series.items()):
                prefix = cache.get((name, labels))
                if prefix is None:
                    prefix = cache[(name, labels)] = exposition.sample_prefix(name, labelnames, labels)
                out.append(prefix + exposition.number(value))
        out.append(exposition.header(names.SERIES_OVERFLOW_TOTAL, _OVERFLOW_HELP, "counter"))
        for family in self._budgeted:
            prefix = exposition.sample_prefix(names.SERIES_OVERFLOW_TOTAL, (names.FAMILY,), (family,))
            out.append(prefix + exposition.number(folded.get(family, 0)))
        return "".join(out)

    def _sorted_keys(self, name: str, series: Mapping[LabelValues, object]) -> list[LabelValues]:
        """The family's label sets in order; sorted again only when one was added (held: the lock)."""
        cached = self._order.get(name)
        if cached is None or len(cached) != len(series):
            cached = self._order[name] = sorted(series)
        return cached

    def _histogram_text(self, name: str, labels: LabelValues, counts: list[int], total: float) -> str:
        pre = self._prefixes.get((name, labels))
        if pre is None:
            _, bounds, extra = HISTOGRAMS[name]
            pre = exposition.histogram_prefixes(name, (*names.REQUEST_LABELS, *extra), labels, bounds)
            self._prefixes[(name, labels)] = pre
        lines, running = [], 0
        for prefix, count in zip(pre, counts, strict=False):
            running += count
            lines.append(prefix + exposition.number(running))
        lines.append(pre[-2] + exposition.number(running))
        lines.append(pre[-1] + exposition.number(total))
        return "".join(lines)

    def describe(self) -> Iterator[Metric]:
        """The families (without samples), so the registry can refuse a duplicate name."""
        for name, (doc, _, extra) in HISTOGRAMS.items():
            yield HistogramMetricFamily(name, doc, labels=[*names.REQUEST_LABELS, *extra])
        for name in (names.REQUESTS_TOTAL, names.REQUEST_ERRORS_TOTAL, names.TOKENS_TOTAL):
            yield CounterMetricFamily(name, "")
        if self._goodput is not None:
            yield CounterMetricFamily(names.GOODPUT_REQUESTS_TOTAL, "")
        yield CounterMetricFamily(names.SERIES_OVERFLOW_TOTAL, "")


_COUNTERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (names.REQUESTS_TOTAL, "Finished requests, successful or not.", ()),
    (names.REQUEST_ERRORS_TOTAL, "Failed requests by error kind.", (names.ERROR_KIND,)),
    (names.TOKENS_TOTAL, "Tokens by type (input = prompt, output = generated).", (names.TOKEN_TYPE,)),
)
_GOODPUT_HELP = (
    "Requests by whether they met every latency SLO of the lane they were routed to (met), "
    "missed one (missed) or failed (failed); lane is the routed lane."
)
_OVERFLOW_HELP = (
    "Observations folded into the __overflow__ label value: the family's series budget was spent."
)


_NOT_RENDERED = (-1, "")


# Every family the budget covers, exported from the start so a rate() sees the first fold.
_BUDGETED = (
    *HISTOGRAMS,
    names.REQUESTS_TOTAL,
    names.REQUEST_ERRORS_TOTAL,
    names.TOKENS_TOTAL,
    names.WINDOW_QUANTILE_SECONDS,
)
_GROUP_COST = (len(METRICS) + 1) * len(QUANTILES)  # a window group's quantile rows (METRICS and itl)


def _counter(name: str, doc: str, extra: tuple[str, ...], series: dict[LabelValues, float]) -> Metric:
    fam = CounterMetricFamily(name, doc + _otel(name), labels=[*names.REQUEST_LABELS, *extra])
    for labels, value in sorted(series.items()):
        fam.add_metric(list(labels), value)
    return fam
