"""Prometheus exposition of lanewatch's state: custom Collectors over an injected registry.

`RequestMetrics` (request_metrics.py, re-exported here) turns records into histograms and
counters (the request metrics every alert and dashboard reads); `WindowMetrics`,
`ServerMetrics`, `GpuMetrics` and `JoinMetrics` render gauges from the window, the scrape
windows, NVML samples and the OTLP join. Nothing is module-level state: each Collector
registers on the registry it is given, renders from its own state in `collect()`, and so
tests compare exact text. Every name comes from names.py and is documented in
docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from lanewatch.collector.record.window import QUANTILES, Window, convergence_ratio
from lanewatch.exporters import names
from lanewatch.exporters.request_metrics import HISTOGRAMS, LabelCap, RequestMetrics

if TYPE_CHECKING:
    from lanewatch.collector.guard import LaneView
    from lanewatch.collector.record.evidence import GpuSample, ServerStats
    from lanewatch.collector.record.join import JoinStats  # noqa: F401  (named in a string base below)

LabelValues = tuple[str, ...]


__all__ = [
    "HISTOGRAMS",
    "GpuMetrics",
    "JoinMetrics",
    "LabelCap",
    "RequestMetrics",
    "ServerMetrics",
    "WindowMetrics",
]


def _q(q: float) -> str:
    return repr(float(q))


def _gauge(
    name: str, doc: str, labels: Sequence[str], rows: Iterable[tuple[LabelValues, float | None]]
) -> Metric:
    fam = GaugeMetricFamily(name, doc, labels=list(labels))
    for values, value in rows:
        if value is not None:
            fam.add_metric(list(values), value)
    return fam


_WINDOW_QUANTILE_HELP = "Quantiles of each phase over the window, per group."
_WINDOW_QUANTILE_LABELS = (names.TARGET, names.LANE, names.REQUEST_CLASS, names.PHASE, names.QUANTILE)
_FLATNESS_HELP = "Coefficient of variation of mean E2E across request classes (low = flat)."
_CONVERGENCE_HELP = "P99 TTFT of a lane over the slowest lane's (near 1 = routing stopped helping)."
FIT_GAUGES = (
    (names.FIT_FIXED_SECONDS, "Fixed cost in the fit e2e = fixed + per_token * output_tokens.", "fixed_s"),
    (names.FIT_PER_TOKEN_SECONDS, "Per-output-token cost in the e2e fit.", "per_token_s"),
    (
        names.FIT_FIXED_SHARE_RATIO,
        "Fixed cost over mean E2E (near 1 = latency ignores the work).",
        "fixed_share",
    ),
)


class WindowMetrics(Collector):
    """Gauges from the rolling window: quantiles per group, flatness, fit and lane convergence."""

    def __init__(
        self,
        registry: CollectorRegistry | None,
        window: Window,
        clock: Callable[[], float],
        lane_order: Callable[[], Sequence[str]] = list,
    ) -> None:
        self._window, self._clock, self._lane_order = window, clock, lane_order
        if registry is not None:
            registry.register(self)

    def collect(self) -> Iterator[Metric]:
        """Render the window at the clock's `now`."""
        now = self._clock()
        rows = [
            ((*g.key, metric, _q(q)), summary.quantile(q))
            for g in self._window.groups(now)
            for metric, summary in sorted(g.metrics.items())
            for q in QUANTILES
        ]
        yield _gauge(names.WINDOW_QUANTILE_SECONDS, _WINDOW_QUANTILE_HELP, _WINDOW_QUANTILE_LABELS, rows)
        flat = sorted(self._window.flatness_by_lane(now).items())
        yield _gauge(names.FLATNESS_CV, _FLATNESS_HELP, (names.LANE,), (((lane,), cv) for lane, cv in flat))
        fits = sorted(self._window.fit_by_lane(now).items())
        for name, doc, attr in FIT_GAUGES:
            yield _gauge(name, doc, (names.LANE,), (((lane,), getattr(f, attr)) for lane, f in fits))
        yield _gauge(names.LANE_CONVERGENCE_RATIO, _CONVERGENCE_HELP, (names.LANE,), self._convergence(now))

    def _convergence(self, now: float) -> list[tuple[LabelValues, float | None]]:
        p99 = self._window.lane_p99_ttft(now)
        order = [lane for lane in self._lane_order() if lane in p99]
        if len(order) < 2:
            return []
        slowest = order[-1]
        return [((lane,), convergence_ratio(p99[lane], p99[slowest])) for lane in order[:-1]]


_MISSING_HELP = "1 per vLLM family lanewatch reads that the target's last good page lacked under every name."
_UP_HELP = "1 when the last scrape of the target's /metrics succeeded."
_SERVER_QUANTILE_HELP = "Quantiles from vLLM's histograms over the scrape window."
_PREEMPTIONS_HELP = "Preemptions vLLM reported since the collector started."
SERVER_GAUGES = (
    (names.SERVER_REQUESTS_RUNNING, "Requests vLLM is running (all engines).", "requests_running"),
    (names.SERVER_REQUESTS_WAITING, "Requests waiting in vLLM's queue (all engines).", "requests_waiting"),
    (names.SERVER_KV_CACHE_USAGE_RATIO, "KV-cache usage, 0..1 (the fullest engine).", "kv_cache_usage"),
    (
        names.SERVER_PREFIX_CACHE_HIT_RATIO,
        "Prefix-cache hit tokens over queried tokens over the window.",
        "prefix_cache_hit_ratio",
    ),
    (
        names.SERVER_SPEC_DECODE_ACCEPTANCE_RATIO,
        "Accepted over drafted speculative tokens over the window.",
        "spec_decode_acceptance_ratio",
    ),
)


S = TypeVar("S")


class _SourceCollector(Collector, Generic[S]):
    """A Collector that renders whatever `source()` returns at scrape time."""

    def __init__(self, registry: CollectorRegistry | None, source: Callable[[], S]) -> None:
        self._source = source
        if registry is not None:
            registry.register(self)


class ServerMetrics(_SourceCollector[Sequence["ServerStats"]]):
    """What each target's vLLM /metrics says over the scrape window."""

    LABELS = (names.TARGET, names.LANE)

    def collect(self) -> Iterator[Metric]:
        """Render the latest stats of every target."""
        stats = sorted(self._source(), key=lambda s: s.target)
        pairs = [((s.target, s.lane), s) for s in stats]
        yield _gauge(names.SCRAPE_UP, _UP_HELP, self.LABELS, ((k, float(s.up)) for k, s in pairs))
        errors = CounterMetricFamily(names.SCRAPE_ERRORS_TOTAL, "Failed scrapes.", labels=list(self.LABELS))
        for k, s in pairs:
            errors.add_metric(list(k), s.scrape_errors)
        yield errors
        durations = ((k, s.scrape_duration_s) for k, s in pairs)
        yield _gauge(names.SCRAPE_DURATION_SECONDS, "How long the last scrape took.", self.LABELS, durations)
        rows = [
            ((*k, phase, _q(q)), value)
            for k, s in pairs
            for phase, qs in sorted(s.phase_quantiles.items())
            for q, value in sorted(qs.items())
        ]
        labels = (*self.LABELS, names.PHASE, names.QUANTILE)
        yield _gauge(names.SERVER_PHASE_QUANTILE_SECONDS, _SERVER_QUANTILE_HELP, labels, rows)
        for name, doc, attr in SERVER_GAUGES:
            yield _gauge(name, doc, self.LABELS, ((k, getattr(s, attr)) for k, s in pairs))
        pre = CounterMetricFamily(names.SERVER_PREEMPTIONS_TOTAL, _PREEMPTIONS_HELP, labels=list(self.LABELS))
        for k, s in pairs:
            pre.add_metric(list(k), s.preemptions)
        yield pre
        missing = [((*k, family), 1.0) for k, s in pairs for family in s.missing_families]
        yield _gauge(names.SCRAPE_MISSING_FAMILIES, _MISSING_HELP, (*self.LABELS, names.FAMILY), missing)


GPU_GAUGES = (
    (names.GPU_UTILIZATION_RATIO, "Share of time a kernel ran, 0..1.", "utilization_ratio"),
    (names.GPU_MEMORY_USED_BYTES, "GPU memory in use.", "memory_used_bytes"),
    (names.GPU_MEMORY_TOTAL_BYTES, "GPU memory installed.", "memory_total_bytes"),
    (names.GPU_POWER_WATTS, "Power draw.", "power_watts"),
    (names.GPU_TEMPERATURE_CELSIUS, "GPU temperature.", "temperature_celsius"),
    (names.GPU_SM_CLOCK_HERTZ, "SM clock.", "sm_clock_hertz"),
    (names.GPU_MEMORY_CLOCK_HERTZ, "Memory clock.", "memory_clock_hertz"),
    (
        names.GPU_HBM_BANDWIDTH_PEAK_BYTES_PER_SECOND,
        "Peak memory bandwidth: bus width / 8 x max memory clock x 2.",
        "hbm_bandwidth_peak_bytes_per_second",
    ),
    (
        names.GPU_DRAM_BANDWIDTH_UTILIZATION_RATIO,
        "DRAM bandwidth used over its peak, 0..1 (GPM, Hopper and newer).",
        "dram_bandwidth_utilization_ratio",
    ),
)


class GpuMetrics(_SourceCollector[Sequence["GpuSample"]]):
    """The latest NVML sample of every GPU; nothing at all without NVML."""

    def collect(self) -> Iterator[Metric]:
        """Render the latest samples; no families when there are none."""
        samples = sorted(self._source(), key=lambda s: s.index)
        if not samples:
            return
        for name, doc, attr in GPU_GAUGES:
            rows = (((str(s.index), s.uuid, s.name), getattr(s, attr)) for s in samples)
            yield _gauge(name, doc, names.GPU_LABELS, rows)


class LogRecordMetrics(_SourceCollector[tuple[int, int]]):
    """OTLP log records (Envoy's access log) taken as records and refused: (received, refused)."""

    def collect(self) -> Iterator[Metric]:
        """Render the two counters."""
        received, refused = self._source()
        doc = "OTLP log records (access-log entries) taken as request records."
        yield CounterMetricFamily(names.OTLP_LOG_RECORDS_RECEIVED_TOTAL, doc, value=received)
        doc = "OTLP log records refused one by one: never a record."
        yield CounterMetricFamily(names.OTLP_LOG_RECORDS_REFUSED_TOTAL, doc, value=refused)


class IngestMetrics(_SourceCollector[int]):
    """Records posted to the collector's `POST /v1/records` and refused one by one."""

    def collect(self) -> Iterator[Metric]:
        """Render the counter."""
        doc = "Records posted to POST /v1/records refused one by one: never counted or exported."
        yield CounterMetricFamily(names.INGEST_RECORDS_REFUSED_TOTAL, doc, value=self._source())


GuardState = tuple["Sequence[LaneView]", "Mapping[str, int]", int]  # lanes, alert posts by result, refused


class GuardMetrics(_SourceCollector[GuardState]):
    """The fast guard: each lane SLO's state, its verdicts, and its posts to Alertmanager."""

    def collect(self) -> Iterator[Metric]:
        """Render the guard's families."""
        views, posts, refused = self._source()
        keys = [names.LANE, names.SLO]
        firing = GaugeMetricFamily(
            names.GUARD_FIRING, "1 while the fast guard fires for the lane SLO.", labels=keys
        )
        window = GaugeMetricFamily(
            names.GUARD_WINDOW_REQUESTS,
            "Requests judged, and missed, in the window that decides now (the fire window; the resolve "
            "window while firing).",
            labels=[*keys, names.OUTCOME],
        )
        changed = GaugeMetricFamily(
            names.GUARD_LAST_CHANGE_SECONDS, "Unix time the guard last fired or resolved.", labels=keys
        )
        verdicts = CounterMetricFamily(
            names.GUARD_VERDICTS_TOTAL,
            "Requests the fast guard judged: met at first token, or missed (late, or waiting past the SLO).",
            labels=[*keys, names.VERDICT],
        )
        for v in views:
            firing.add_metric([v.lane, v.slo], float(v.firing))
            window.add_metric([v.lane, v.slo, "judged"], v.judged)
            window.add_metric([v.lane, v.slo, "missed"], v.missed)
            if v.changed_at is not None:
                changed.add_metric([v.lane, v.slo], v.changed_at)
            for verdict, count in v.verdicts.items():
                verdicts.add_metric([v.lane, v.slo, verdict], count)
        yield from (firing, window, changed, verdicts)
        sent = CounterMetricFamily(
            names.GUARD_ALERT_POSTS_TOTAL,
            "The guard's posts to Alertmanager, by result.",
            labels=[names.RESULT],
        )
        for result in ("ok", "failed"):
            sent.add_metric([result], posts.get(result, 0))
        yield sent
        doc = "Progress events posted to POST /v1/progress and refused one by one."
        yield CounterMetricFamily(names.GUARD_PROGRESS_REFUSED_TOTAL, doc, value=refused)


class JoinMetrics(_SourceCollector["JoinStats"]):
    """Counters of the OTLP span join."""

    def collect(self) -> Iterator[Metric]:
        """Render the join counters."""
        s = self._source()
        for name, doc, value in (
            (names.OTLP_SPANS_RECEIVED_TOTAL, "vLLM llm_request spans received.", s.spans_received),
            (names.OTLP_SPANS_JOINED_TOTAL, "Spans joined to a request record by trace id.", s.spans_joined),
            (names.OTLP_ORPHAN_SPANS_TOTAL, "Spans no record claimed within the join wait.", s.orphan_spans),
            (
                names.OTLP_UNJOINED_RECORDS_TOTAL,
                "Records that waited for a span and got none.",
                s.unjoined_records,
            ),
        ):
            yield CounterMetricFamily(name, doc, value=value)
        refused = CounterMetricFamily(
            names.OTLP_SPANS_REFUSED_TOTAL, "Spans refused: never joined to a record.", labels=[names.REASON]
        )
        for reason in names.OTLP_REFUSAL_REASONS:
            refused.add_metric([reason], s.spans_refused.get(reason, 0))
        yield refused
