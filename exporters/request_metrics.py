"""The request metrics: histograms and counters over every record, within a series budget.

`RequestMetrics` turns records into the histograms and counters every alert and dashboard
reads (names.py), keeps each family within the series budget (series_budget.py), and
renders its own exposition incrementally (exposition.py): only what changed since the last
scrape is written again. A record is counted whole or not at all: every value it feeds is
computed (and any that no float holds raises) before the first series moves.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from lanewatch.collector.record.error_kinds import metric_error_kind
from lanewatch.collector.record.goodput import Goodput, outcome, routed_lane
from lanewatch.collector.record.timing import RequestTiming, breakdown
from lanewatch.collector.record.window import METRICS, QUANTILES
from lanewatch.exporters import exposition, names
from lanewatch.exporters.series_budget import LabelCap, SeriesBudget, fold, is_overflow

__all__ = ["FAMILIES", "HISTOGRAMS", "Family", "LabelCap", "RequestMetrics"]

LabelValues = tuple[str, ...]


def _otel(name: str) -> str:
    other = names.OTEL_EQUIVALENT.get(name)
    return f" (OpenTelemetry GenAI: {other})" if other else ""


@dataclass(frozen=True, slots=True)
class Family:
    """One request-metrics family: its exposition (name, help, buckets, labels), its docs row, its getter.

    A family with a getter is fed by it alone: a histogram observes the value, a counter adds it
    (when non-zero). One without (`get` None) is fed by its own code in `RequestMetrics`.
    docs/metrics.md's request-metrics table is rendered from these (exporters/metrics_doc.py).
    """

    name: str
    help: str  # the HELP line
    doc: str  # its row's "what" on docs/metrics.md (Markdown)
    buckets: Sequence[float] | None = None  # a histogram's bounds; None: a counter
    labels: tuple[str, ...] = ()  # after REQUEST_LABELS
    get: Callable[[RequestTiming], float | None] | None = None
    every_request: bool = False  # False: successful requests only (latencies); True: every one

    @property
    def kind(self) -> str:
        """`histogram` or `counter`, as the exposition's TYPE line says."""
        return "counter" if self.buckets is None else "histogram"


_LATENCY = names.LATENCY_BUCKETS
# Every family RequestMetrics exports over the records, in exposition order (histograms, then counters).
FAMILIES: tuple[Family, ...] = (
    Family(
        names.TTFT_SECONDS,
        "Time to the first content-bearing chunk.",
        "request start to the first chunk whose delta carries content; a rescued request counts for "
        "each lane its own attempt's wait ([gateway.md](gateway.md#rescue))",
        _LATENCY,
        get=attrgetter("own_ttft_s"),
    ),
    Family(
        names.TPOT_SECONDS,
        "Time per output token after the first: (e2e - ttft) / (tokens - 1).",
        "(e2e − ttft) / (output_tokens − 1), per request",
        _LATENCY,
        get=attrgetter("tpot_s"),
    ),
    Family(
        names.ITL_SECONDS,
        "Gaps between content chunks, one sample per gap.",
        "each gap between content chunks (one sample per gap; for a record of over 1,024 gaps, `_count` "
        "and `_sum` exact and the buckets scaled from its sample: "
        "[collector.md](collector.md#the-records-file))",
        _LATENCY,
    ),
    Family(
        names.E2E_SECONDS,
        "Request start to the end of the stream.",
        "request start to the end of the stream",
        _LATENCY,
        get=attrgetter("e2e_s"),
    ),
    Family(
        names.TTFB_SECONDS,
        "Request start to the response headers.",
        "request start to the response headers",
        _LATENCY,
        get=attrgetter("ttfb_s"),
    ),
    Family(
        names.PHASE_SECONDS,
        "The stacked breakdown of e2e, one part per phase label.",
        "the stacked breakdown of e2e, label `phase`: `dns`, `connect`, `tls`, `send`, `queue`, `prefill`, "
        "`residual`, `decode` (with a joined vLLM span) or `server_wait` in place of queue+prefill+residual "
        "(without); the parts of one request add up to its e2e",
        _LATENCY,
        labels=(names.PHASE,),
    ),
    Family(
        names.OUTPUT_TOKENS,
        "Output tokens per request.",
        "output tokens per request (`TOKEN_BUCKETS`)",
        names.TOKEN_BUCKETS,
        get=attrgetter("output_tokens"),
    ),
    Family(
        names.REQUESTS_TOTAL,
        "Finished requests, successful or not.",
        "finished requests, successful or not",
    ),
    Family(
        names.REQUEST_ERRORS_TOTAL,
        "Failed requests by error kind.",
        "failed requests, label `error_kind`: the closed set in `collector/record/timing.py` `ErrorKind`, "
        "except that a 4xx saying the client's request was wrong is `http_400`, `http_404`, `http_413` or "
        "`http_422` (`collector/record/error_kinds.py`; other 4xx but 429 stay `http_4xx`)",
        labels=(names.ERROR_KIND,),
    ),
    Family(
        names.TOKENS_TOTAL,
        "Tokens by type (input = prompt, output = generated).",
        "tokens, label `token_type` = `input` (prompt) \\| `output`",
        labels=(names.TOKEN_TYPE,),
    ),
    Family(
        names.REQUEST_CACHED_PROMPT_TOKENS_TOTAL,
        "Prompt tokens the server reported served from its prefix cache "
        "(usage.prompt_tokens_details.cached_tokens).",
        "prompt tokens vLLM served from its prefix cache, as each response's "
        "`usage.prompt_tokens_details.cached_tokens` reported them (the record's `cached_prompt_tokens`). "
        "vLLM sends the field only when run with `--enable-prompt-tokens-details`, and only for a request "
        "that hit the cache, so without the flag this stays 0; with it, its rate over `lanewatch_tokens_total"
        '{token_type="input"}`\'s is the share of prompt tokens the cache served, per lane and class, as '
        "the clients' requests saw it",
        get=attrgetter("cached_prompt_tokens"),
        every_request=True,
    ),
    Family(
        names.GOODPUT_REQUESTS_TOTAL,
        "Requests by whether they met every latency SLO of the lane they were routed to (met), "
        "missed one (missed) or failed (failed); lane is the routed lane.",
        "requests judged against every latency SLO of their lane, label `outcome` = `met` \\| `missed` "
        "\\| `failed`; `lane` is the lane the request was routed to ([slo.md](slo.md#goodput)); "
        "exported when goodput is configured",
        labels=(names.OUTCOME,),
    ),
)
# name → (help, buckets, extra labels after REQUEST_LABELS): the histograms of FAMILIES
HISTOGRAMS: dict[str, tuple[str, Sequence[float], tuple[str, ...]]] = {
    f.name: (f.help, f.buckets, f.labels) for f in FAMILIES if f.buckets is not None
}
_COUNTER_FAMILIES = tuple(f for f in FAMILIES if f.buckets is None)
# Families fed by their getter: those every request feeds, and those only a success does.
_EVERY = tuple(f for f in FAMILIES if f.get is not None and f.every_request)
_SUCCESS = tuple(f for f in FAMILIES if f.get is not None and not f.every_request)
# (family, getter) of what a failed request feeds, and of what a successful one does, in order
_FED_FAILED: tuple[tuple[Family, Callable[[RequestTiming], float | None]], ...] = tuple(
    (f, f.get) for f in _EVERY if f.get is not None
)
_FED_OK: tuple[tuple[Family, Callable[[RequestTiming], float | None]], ...] = tuple(
    (f, f.get) for f in (*_EVERY, *_SUCCESS) if f.get is not None
)


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

    def add(self, spread: _Spread) -> None:
        """Take observations already placed in buckets (`_itl_spread`)."""
        counts = self.counts
        places, weights, total = spread
        if weights is None:
            for i in places:  # one record's ITL gaps: dozens, on the gateway's request path
                counts[i] += 1
        else:
            for i, weight in zip(places, weights, strict=True):
                counts[i] += weight
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
        self._sums: dict[str, dict[LabelValues, float]] = {f.name: {} for f in _COUNTER_FAMILIES}
        self._sums[names.GOODPUT_REQUESTS_TOTAL] = self._judged
        self._requests = self._sums[names.REQUESTS_TOTAL]
        self._errors = self._sums[names.REQUEST_ERRORS_TOTAL]
        self._tokens = self._sums[names.TOKENS_TOTAL]
        # The counter families in exposition order: (name, help, extra labels, series); goodput's
        # only when it is judged.
        self._counters: list[tuple[str, str, tuple[str, ...], dict[LabelValues, float]]] = [
            (f.name, f.help, f.labels, self._sums[f.name])
            for f in _COUNTER_FAMILIES
            if goodput is not None or f.name != names.GOODPUT_REQUESTS_TOTAL
        ]
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
        """Count a finished request; latency histograms take only requests that succeeded. A value no
        float holds (a token count of 10**400) raises before any series moved: nothing is counted."""
        record = self.cap(record)
        labels = tuple(str(getattr(record, label)) for label in names.REQUEST_LABELS)
        # First every value the record feeds, where anything can fail (float() of a huge int, a
        # getter's division, a sample's spread); then the series, where nothing can.
        kind = metric_error_kind(record)
        prompt = float(record.prompt_tokens or 0)
        output = float(record.output_tokens or 0)
        ok = record.ok
        fed = [(f, float(v)) for f, get in (_FED_OK if ok else _FED_FAILED) if (v := get(record)) is not None]
        itl = _itl_spread(record) if ok else None
        late = record.late_ttft  # a won rescue: the late lane is judged by its own wait
        parts = list(breakdown(record).items()) if ok else []
        goodput = self._goodput
        result = outcome(goodput, record) if goodput is not None else None
        routed = routed_lane(record) if result is not None else ""
        with self._lock:
            self._inc(names.REQUESTS_TOTAL, self._requests, labels)
            if kind is not None:
                self._inc(names.REQUEST_ERRORS_TOTAL, self._errors, (*labels, kind))
            if prompt:
                self._inc(names.TOKENS_TOTAL, self._tokens, (*labels, "input"), prompt)
            if output:
                self._inc(names.TOKENS_TOTAL, self._tokens, (*labels, "output"), output)
            for family, value in fed:  # a histogram observes its getter's value, a counter adds it
                if family.buckets is not None:
                    self._hist(family.name, labels).observe(family.buckets, value)
                elif value:
                    self._inc(family.name, self._sums[family.name], labels, value)
            if late is not None:
                late_labels = tuple(
                    self._late_label(label, v, late[0])
                    for label, v in zip(names.REQUEST_LABELS, labels, strict=True)
                )
                self._hist(names.TTFT_SECONDS, late_labels).observe(names.LATENCY_BUCKETS, late[1])
            if itl is not None:
                self._hist(names.ITL_SECONDS, labels).add(itl)
            for part, value in parts:
                self._hist(names.PHASE_SECONDS, (*labels, part)).observe(names.LATENCY_BUCKETS, value)
            if result is not None:
                self._judge(labels, routed, result)

    def _late_label(self, label: str, value: str, late_lane: str) -> str:
        """A label of the late lane's TTFT series: its lane (bounded), named as its own target too."""
        if label in (names.LANE, names.TARGET):
            return self._bounded(label, late_lane, self._lanes if label == names.LANE else None)
        return value

    def _judge(self, labels: LabelValues, routed_to: str, result: str) -> None:
        lane = self._bounded(names.LANE, routed_to, self._lanes)
        routed = tuple(
            lane if label == names.LANE else v for label, v in zip(names.REQUEST_LABELS, labels, strict=True)
        )
        self._inc(names.GOODPUT_REQUESTS_TOTAL, self._judged, (*routed, result))

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
        for name, _, _, _ in self._counters:
            yield CounterMetricFamily(name, "")
        yield CounterMetricFamily(names.SERIES_OVERFLOW_TOTAL, "")


_OVERFLOW_HELP = (
    "Observations folded into the __overflow__ label value: the family's series budget was spent."
)


_NOT_RENDERED = (-1, "")


# Every family the budget covers, exported from the start so a rate() sees the first fold.
_BUDGETED = (
    *HISTOGRAMS,
    *(f.name for f in _COUNTER_FAMILIES if f.name != names.GOODPUT_REQUESTS_TOTAL),
    names.WINDOW_QUANTILE_SECONDS,
)
_GROUP_COST = (len(METRICS) + 1) * len(QUANTILES)  # a window group's quantile rows (METRICS and itl)


# One record's observations of a histogram, placed: bucket indexes, each one's weight (None: 1
# each), and their sum.
_Spread = tuple[list[int], list[int] | None, float]


def _itl_spread(r: RequestTiming) -> _Spread | None:
    """The record's gaps placed in the ITL histogram's buckets; None without gaps. A record whose
    itl_s is a sample (itl_stats: collector/record/itl.py) gives its exact count and sum, the buckets
    scaled from the sample."""
    bounds, find = names.LATENCY_BUCKETS, bisect.bisect_left
    places = [find(bounds, value) for value in r.itl_s]  # `le` is inclusive
    stats = r.itl_stats
    if stats is None:
        return (places, None, sum(r.itl_s, 0.0)) if places else None
    if not places and not stats.count:
        return None
    # each value stands for `share` gaps (the first `extra` of them, one more); a count without a
    # sample to spread it over raises here, before anything is counted
    share, extra = divmod(stats.count, len(places))
    return places, [share + (i < extra) for i in range(len(places))], stats.sum_s


def _counter(name: str, doc: str, extra: tuple[str, ...], series: dict[LabelValues, float]) -> Metric:
    fam = CounterMetricFamily(name, doc + _otel(name), labels=[*names.REQUEST_LABELS, *extra])
    for labels, value in sorted(series.items()):
        fam.add_metric(list(labels), value)
    return fam
