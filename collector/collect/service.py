"""The collector service: the one place that wires sources, the join, analysis and exporters.

    probe suite ─► submit ─► Joiner ─┐        ┌► Window ─► WindowMetrics
    POST /v1/records ─► submit ─┘    │        │
    POST /v1/traces ─► spans ────────┘─► emit ┼► RequestMetrics           ─► GET /metrics
    scrape loop ─► ServerWindow per target ───┼──────────► ServerMetrics
    GPU sampler ─► latest GpuSamples ─────────┼──────────► GpuMetrics
                                              └► records JSONL (--records)

Everything runs on one asyncio loop (NVML calls in a worker thread), so the parts need no
locks between them. `/metrics` keeps off the loop what grows with the series budget: the
window's quantiles are summarised on a worker thread from a copy of the window when a scrape
asks and the last summary is older than WINDOW_REFRESH_S (scrapes in that time share it), and
the request metrics (which hold their own lock) render there too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from fastapi import FastAPI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer
from prometheus_client import CollectorRegistry, generate_latest

from lanewatch.alerts.spec import DEFAULT_SPEC, load_spec
from lanewatch.collector.collect.credentials import IngestAuth, load_ingest_auth
from lanewatch.collector.collect.envoy_log import REPORTER as ENVOY_REPORTER
from lanewatch.collector.collect.envoy_log import end_progress
from lanewatch.collector.collect.family_notices import FamilyNotices
from lanewatch.collector.collect.gpu import GpuSampler, load_nvml
from lanewatch.collector.collect.label_sets import closed_classes, closed_lanes
from lanewatch.collector.collect.otlp_logs import LogsAdmission, LogsAdmitted
from lanewatch.collector.collect.scrape import ScrapeTarget, ServerSnapshot, ServerWindow, run_scrape_loop
from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.config import LanewatchConfig, ingest_auth_problem
from lanewatch.collector.guard import FastGuard
from lanewatch.collector.guard.spec import load_guard
from lanewatch.collector.probe.settings import Target
from lanewatch.collector.probe.spans import TRACER_NAME
from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.record.evidence import GpuSample, ServerSpan
from lanewatch.collector.record.files import RecordsWriter
from lanewatch.collector.record.goodput import Goodput
from lanewatch.collector.record.goodput import from_spec as goodput_from_spec
from lanewatch.collector.record.join import Joiner, JoinStats
from lanewatch.collector.record.sink import FanOut, RecordSink
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.collector.record.window import Window
from lanewatch.exporters import otlp as otlp_export
from lanewatch.exporters.probe_schedule import ProbeScheduleMetrics
from lanewatch.exporters.prometheus import (
    GpuMetrics,
    GuardMetrics,
    IngestMetrics,
    JoinMetrics,
    LogRecordMetrics,
    RequestMetrics,
    ServerMetrics,
    WindowMetrics,
)

log = logging.getLogger(__name__)

WINDOW_REFRESH_S = 1.0  # the window's quantiles on /metrics are this old at most (more for a big window)


class RecordSource(Protocol):
    """A source that hands records to a sink until stopped (the probe suite)."""

    async def run(self) -> None:
        """Produce records until `shutdown()`."""

    def shutdown(self) -> None:
        """Ask `run` to return."""


SourceFactory = Callable[[LanewatchConfig, RecordSink, Tracer | None], RecordSource]


def probe_suite(cfg: LanewatchConfig, sink: RecordSink, tracer: Tracer | None) -> RecordSource:
    """The configured probe suite (collector/probe/suites.py)."""
    from lanewatch.collector.probe.suites import ProbeSuite

    return ProbeSuite(cfg.targets, cfg.probe, sink, record_content=cfg.export.record_content, tracer=tracer)


def load_goodput(enabled: bool, spec_path: Path | None) -> Goodput | None:
    """The goodput judge from an SLO spec (the bundled default without a path); None when off.

    A spec that does not load raises SpecError, naming each bad field and line.
    """
    if not enabled:
        return None
    return goodput_from_spec(load_spec(spec_path or DEFAULT_SPEC))


def lane_order(cfg: LanewatchConfig) -> list[str]:
    """Lanes fastest first: the gateway's order when given, else as the targets list them."""
    if cfg.gateway.lane_order:
        return list(cfg.gateway.lane_order)
    return list(dict.fromkeys(t.lane for t in cfg.targets))


class CollectorService:
    """Every collector part, wired; `run()` drives the loops, `app()` is the HTTP face.

    Built from loaded inputs: the constructor does no I/O (it reads no file and starts no
    exporter), so a test hands it what it needs; `from_config` loads them for a command.
    """

    def __init__(
        self,
        cfg: LanewatchConfig,
        *,
        goodput: Goodput | None = None,
        ingest_token: str | None = None,
        ingest_auth: IngestAuth | None = None,
        tracer: Tracer | None = None,
        provider: TracerProvider | None = None,
        writer: RecordsWriter | None = None,
        source_factory: SourceFactory | None = probe_suite,
        nvml: Any | None = None,
        guard: FastGuard | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`guard` is the fast guard (None: off).

        `goodput` judges records (None: no goodput metrics); `ingest_auth` (every credential) or
        `ingest_token` (one shared token) guards the receivers, open without either;
        `tracer` takes probe spans; `provider` (the tracer's owner) is flushed and `writer` (the records
        file) closed at shutdown. Every default is a working part that needs no I/O."""
        self.cfg = cfg
        self.clock = clock
        self.window = Window(cfg.export.window_s)
        ex = cfg.export
        self.metrics = RequestMetrics(
            None,
            ex.max_label_values,
            goodput,
            max_series=ex.max_series,
            max_series_per_family=ex.max_series_per_family,
            lanes=closed_lanes(ex, cfg.gateway, (t.lane for t in cfg.targets), goodput),
            classes=closed_classes(ex, cfg.gateway, (c.name for c in cfg.probe.classes)),
        )
        # /metrics renders three parts (render_metrics): the live registry's collectors, which read
        # the loop's live state and are small; the window's, from a copy; the request metrics' own.
        self._live = CollectorRegistry()
        self._window_text: bytes | None = None  # the last summary, shared by the scrapes that follow it
        self._window_fresh_until = 0.0  # monotonic time until which _window_text is served as is
        self._window_refresh: asyncio.Task[None] | None = None
        scraped = [t for t in shard_targets(cfg) if t.scrape] if cfg.scrape.enabled else []
        self.scrape_targets = [ScrapeTarget(t.name, t.lane, t.scrape_url) for t in scraped]
        # A target's CA bundle (or -k) applies to its scrape as to its probes.
        self.scrape_tls = {t.name: (t.cacert, t.insecure) for t in scraped}
        self.server_windows = {t.name: ServerWindow(t.name, t.lane, cfg.scrape.window_s) for t in scraped}
        self._family_notices = FamilyNotices()
        ServerMetrics(self._live, lambda: [w.stats(clock()) for w in self.server_windows.values()])
        self.joiner = Joiner(cfg.otlp.join_wait_s, cfg.otlp.max_pending) if cfg.otlp.enabled else None
        if self.joiner is not None:
            JoinMetrics(self._live, self._join_stats)
        self.schedule_metrics = ProbeScheduleMetrics(self._live)
        self.gpu_samples: list[GpuSample] = []
        GpuMetrics(self._live, lambda: self.gpu_samples)
        self._nvml = nvml
        self._writer = writer
        self._tracer = tracer if tracer is not None or provider is None else provider.get_tracer(TRACER_NAME)
        self._provider = provider
        self._source_factory = source_factory
        self._deliver = FanOut([self._write])  # what the metrics counted, to the file and listeners
        self._auth = ingest_auth if ingest_auth is not None else IngestAuth(ingest_token)
        self._span_calls = 0
        # OTLP log records taken as records, and refused (not access-log entries, bad values, past the bound)
        self.logs_received = self.logs_refused = 0
        self.logs_progress = 0  # Envoy's periodic entries (streams under way), taken as guard progress
        if cfg.otlp.enabled and cfg.otlp.logs:
            LogRecordMetrics(self._live, lambda: (self.logs_received, self.logs_refused))
        self.records_refused = 0  # records posted to POST /v1/records and refused one by one
        if cfg.ingest.enabled:
            IngestMetrics(self._live, lambda: self.records_refused)
        self.grpc_port: int | None = None  # the OTLP/gRPC receiver's bound port, once serving
        self.guard = guard
        self.progress_refused = 0  # progress events posted to POST /v1/progress and refused one by one
        if guard is not None:
            GuardMetrics(self._live, lambda: (guard.views(), guard.posts, self.progress_refused))

    @classmethod
    def from_config(
        cls,
        cfg: LanewatchConfig,
        *,
        tracer: Tracer | None = None,
        source_factory: SourceFactory | None = probe_suite,
        nvml: Any | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> CollectorService:
        """The service `cfg` describes: its SLO spec loaded, its ingest token read, its span exporter
        started (unless `tracer` is given), its records file opened. SpecError or SecretError naming the
        field, ConfigError for an open ingest that must not be (`ingest_auth_problem`), or OSError
        naming the records file, when one cannot be."""
        problem = ingest_auth_problem(cfg)
        if problem is not None:  # flags laid over a validated file are not validated as a whole
            raise ConfigError(problem)
        ex = cfg.export
        goodput = load_goodput(ex.goodput, ex.slo_spec)
        guard = load_guard(cfg.guard, cfg.export.slo_spec)
        auth = load_ingest_auth(cfg.ingest)
        writer = RecordsWriter(ex.records_path) if ex.records_path else None
        provider = None
        if tracer is None and ex.otlp_endpoint:
            provider = otlp_export.tracer_provider(ex.otlp_endpoint, service_name="lanewatch-collector")
        return cls(
            cfg,
            goodput=goodput,
            ingest_auth=auth,
            tracer=tracer,
            provider=provider,
            writer=writer,
            source_factory=source_factory,
            nvml=nvml,
            guard=guard,
            clock=clock,
        )

    # ------------------------------------------------------------ the record path

    def submit(self, record: RequestTiming) -> None:
        """The sink every source calls: join when a span may come, then emit."""
        ready = self.joiner.add_record(record, self.clock()) if self.joiner is not None else [record]
        self._emit_all(ready)

    def receive_records(self, records: Iterable[RequestTiming]) -> None:
        """Records another process's source posted (POST /v1/records): the same path as probes'."""
        guard = self.guard
        for record in records:
            if guard is not None:
                guard.record(record)  # on arrival: the join may hold it back a while
            self.submit(record)

    def receive_progress(self, reporter: str, events: list[Progress]) -> None:
        """In-flight events a gateway posted (POST /v1/progress), for the fast guard."""
        if self.guard is not None:
            self.guard.progress(reporter, events)

    def count_refused_progress(self, count: int) -> None:
        """Progress events a report held that were refused."""
        self.progress_refused += count

    def receive_spans(self, spans: Iterable[ServerSpan]) -> None:
        """Spans from the OTLP receiver: each completes a waiting record or waits for one."""
        if self.joiner is None:
            return
        self._span_calls += 1  # the join's fair bound counts spans by sender, then by call
        for span in spans:
            self._emit_all(self.joiner.add_span(span, self.clock(), self._span_calls))

    def receive_logs(self, admission: LogsAdmission, reporter: str | None = None) -> None:
        """Records from Envoy's access log (OTLP logs): the same path as the tap's; refused ones counted.

        `reporter`: the name of the sender's own credential, which keys its progress in the guard
        (None, the shared token or an open ingest: every Envoy is one reporter, `envoy`).

        The fast guard takes Envoy's requests as progress (when `envoy` is in guard.record_sources):
        the periodic entries of streams under way, then the end entry's record as the request's last
        event, so a request judged while in flight is not judged again when it ends."""
        self.logs_refused += admission.rejected
        self.logs_received += len(admission.kept)
        progress = admission.progress if isinstance(admission, LogsAdmitted) else []
        self.logs_progress += len(progress)
        guard = self.guard
        if guard is not None and "envoy" in self.cfg.guard.record_sources:
            ends = [p for r in admission.kept if (p := end_progress(r)) is not None]
            guard.progress(reporter or ENVOY_REPORTER, [*progress, *ends])
            for record in admission.kept:
                if record.request_id is None:  # no id to match its periodic entries by
                    guard.record(record)
        for record in admission.kept:
            self.submit(record)

    def count_refused_records(self, count: int) -> None:
        """Records a POST /v1/records batch held that were refused: counted, never emitted."""
        self.records_refused += count

    def count_refused(self, refused: Mapping[str, int]) -> None:
        """Spans a receiver refused (by reason): counted, never joined."""
        if self.joiner is not None:
            self.joiner.stats.spans_refused.update(refused)

    def expire(self) -> None:
        """Release records whose join wait ran out."""
        if self.joiner is not None:
            self._emit_all(self.joiner.expire(self.clock()))

    def add_listener(self, sink: RecordSink) -> None:
        """Also hand every emitted record to `sink` (e.g. a test or the report)."""
        self._deliver.add(sink)

    def add_snapshot(self, snap: ServerSnapshot) -> None:
        """A scrape result for its target's window."""
        self.server_windows[snap.target].add(snap)
        for line in self._family_notices.notices(snap):
            log.warning("%s", line)

    def _emit_all(self, records: Iterable[RequestTiming]) -> None:
        for r in records:
            self._emit(r)

    def _emit(self, record: RequestTiming) -> None:
        # Prompt and response text (record_content) go to the file and listeners, never to
        # metrics, and the window does not hold them for its minutes.
        capped = self.metrics.cap_group(record.without_content())
        # The metrics first: they take a record whole or raise having taken nothing, so a record
        # they cannot count never reaches the window's quantiles either.
        self.metrics.observe(capped)
        self.window.add(capped, self.clock())
        self._deliver(record)  # the file keeps the record as measured, uncapped

    def _write(self, record: RequestTiming) -> None:
        if self._writer is not None:  # until the service closes it
            self._writer.write(record)

    @property
    def ingest_auth(self) -> IngestAuth:
        """The tokens every ingest path (records, progress, OTLP/HTTP, OTLP/gRPC) asks for; open: none."""
        return self._auth

    def _join_stats(self) -> JoinStats:
        return self.joiner.stats if self.joiner is not None else JoinStats()

    # ------------------------------------------------------------ the loops

    async def run(self, stop: asyncio.Event) -> None:
        """Run every configured loop until `stop` is set; then stop probing, drain the join, close."""
        factory = self._source_factory
        probing = factory is not None and self.cfg.probe.enabled and bool(self.cfg.targets)
        source = factory(self.cfg, self.submit, self._tracer) if factory is not None and probing else None
        self._observe_schedule(source)
        probe_task = asyncio.create_task(source.run(), name="probe") if source is not None else None
        tasks = [
            asyncio.create_task(self._expire_loop(stop), name="join-expiry"),
        ]
        if self.scrape_targets:
            tasks.append(asyncio.create_task(self._scrape(stop), name="scrape"))
        if self.cfg.gpu.enabled:
            tasks.append(asyncio.create_task(self._gpu_loop(stop), name="gpu"))
        if self.guard is not None:
            tasks.append(asyncio.create_task(self._guard_loop(stop), name="guard"))
        try:
            await stop.wait()
        finally:
            stop.set()
            if source is not None and probe_task is not None:
                source.shutdown()
                await asyncio.gather(probe_task, return_exceptions=True)
            await self.drain()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.shutdown()

    def _observe_schedule(self, source: RecordSource | None) -> None:
        """Export the probe scheduler's start delays and skipped turns, and show the fast guard the
        probes under way (the probe suite only)."""
        from lanewatch.collector.probe.suites import ProbeSuite

        if isinstance(source, ProbeSuite):
            source.scheduler.on_start = self.schedule_metrics.started
            source.scheduler.on_skip = self.schedule_metrics.skipped
            if self.guard is not None:
                self.guard.watch("probe", source.in_flight)

    async def _guard_loop(self, stop: asyncio.Event) -> None:
        from lanewatch.collector.guard.alertmanager import AlertmanagerPost

        assert self.guard is not None
        post = AlertmanagerPost(list(self.cfg.guard.alertmanager_urls))
        try:
            await self.guard.run(stop, post, self.cfg.guard.tick_s)
        finally:
            await post.close()

    async def drain(self) -> None:
        """Give records still waiting for a span their full wait (spans keep arriving meanwhile)."""
        while self.joiner is not None and self.joiner.pending[0]:
            self.expire()
            await asyncio.sleep(0.02)

    async def _scrape(self, stop: asyncio.Event) -> None:
        """Scrape every target until `stop`: one client (one kept-alive connection) per target.

        One shared client would hold a connection per target in one pool, and httpcore's pool
        walks every connection on every request: at 1,000 targets that walk was most of the
        collector's CPU. The TLS context is built once per setting and shared.
        """
        import httpx

        from lanewatch.collector.probe.transport import ssl_context

        contexts = {tls: ssl_context(*tls) for tls in set(self.scrape_tls.values())}
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        clients = {
            t.target: httpx.AsyncClient(verify=contexts[self.scrape_tls[t.target]], limits=limits)
            for t in self.scrape_targets
        }
        sc = self.cfg.scrape
        try:
            await run_scrape_loop(
                clients, self.scrape_targets, sc.interval_s, sc.timeout_s, self.add_snapshot, stop
            )
        finally:
            await asyncio.gather(*(c.aclose() for c in clients.values()), return_exceptions=True)

    async def _expire_loop(self, stop: asyncio.Event) -> None:
        tick = min(0.05, max(self.cfg.otlp.join_wait_s / 4, 0.005))
        while not stop.is_set():
            self.expire()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=tick)

    async def _gpu_loop(self, stop: asyncio.Event) -> None:
        nvml = self._nvml if self._nvml is not None else load_nvml()
        if nvml is None:
            return
        sampler = GpuSampler(nvml)
        if not await asyncio.to_thread(sampler.start):
            return
        try:
            while not stop.is_set():
                self.gpu_samples = await asyncio.to_thread(sampler.sample)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.cfg.gpu.interval_s)
        finally:
            await asyncio.to_thread(sampler.shutdown)
            self.gpu_samples = []

    def shutdown(self) -> None:
        """Release every waiting record (unjoined) and close the records file."""
        if self.joiner is not None:
            self._emit_all(self.joiner.flush())
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._provider is not None:
            otlp_export.shutdown(self._provider, timeout_s=2.0)  # the last probe spans go out
            self._provider = None

    # ------------------------------------------------------------ HTTP

    def render_metrics(self) -> bytes:
        """The Prometheus exposition of everything, summarised now on this thread."""
        window = window_exposition(self.window.snapshot(self.clock()), self.clock(), lane_order(self.cfg))
        return generate_latest(self._live) + window + self.metrics.exposition().encode()

    async def render_metrics_async(self) -> bytes:
        """`render_metrics` with the part that grows with the series budget on a worker thread."""
        head = generate_latest(self._live)
        window = await self.window_text()
        tail = await asyncio.to_thread(self.metrics.exposition)
        return head + window + tail.encode()

    async def window_text(self) -> bytes:
        """The window's exposition: the last summary while fresh, else one made now for waiting scrapes."""
        if self._window_text is None or time.monotonic() >= self._window_fresh_until:
            if self._window_refresh is None or self._window_refresh.done():
                self._window_refresh = asyncio.create_task(self.refresh_window(), name="window-summary")
            # Shielded: a scrape that gives up does not cancel the summary the others wait for.
            await asyncio.shield(self._window_refresh)
        assert self._window_text is not None
        return self._window_text

    async def refresh_window(self) -> None:
        """Summarise a copy of the window on a worker thread for this scrape and the next ones."""
        now, started = self.clock(), time.monotonic()
        snap = self.window.snapshot(now)
        self._window_text = await asyncio.to_thread(window_exposition, snap, now, lane_order(self.cfg))
        # A big window takes a while to summarise: scrapes in a tight loop keep that under a tenth of a core.
        self._window_fresh_until = time.monotonic() + max(WINDOW_REFRESH_S, 10 * (time.monotonic() - started))

    def app(self) -> FastAPI:
        """The FastAPI app serving this collector (collect/http_app.py)."""
        from lanewatch.collector.collect.http_app import build_app

        return build_app(self)

    def health(self) -> dict[str, Any]:
        """What /healthz answers: ok, and how the parts stand."""
        pending = self.joiner.pending if self.joiner is not None else (0, 0)
        return {
            "status": "ok",
            "targets": len(self.cfg.targets),
            "scrape_up": {name: w.stats(self.clock()).up for name, w in self.server_windows.items()},
            "join_pending": {"records": pending[0], "spans": pending[1]},
            "gpus": len(self.gpu_samples),
        }


def window_exposition(window: Window, now: float, lanes: list[str]) -> bytes:
    """The window's gauges as Prometheus text; pure over its arguments, so it may run on a thread."""
    registry = CollectorRegistry()
    WindowMetrics(registry, window, lambda: now, lambda: lanes)
    return generate_latest(registry)


def shard_targets(cfg: LanewatchConfig) -> list[Target]:
    """The targets this collector owns under `probe.shard` (all of them without sharding)."""
    from lanewatch.collector.probe.suites import parse_shard, shard_of

    shard = parse_shard(cfg.probe.shard)
    if shard is None:
        return list(cfg.targets)
    return [t for t in cfg.targets if shard_of(t.name, shard[1]) == shard[0]]
