"""The gateway's state and lifecycle: lanes and their pools, routing, degrade, sessions, health checks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial

import aiohttp

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.common.secrets import read_secret_or_none
from lanewatch.collector.degrade_state.state import DegradeState, LaneDegrade, Shifter
from lanewatch.collector.gateway.settings import GatewayConfig, LaneConfig
from lanewatch.collector.http1.client import UpstreamClient
from lanewatch.collector.progress.inflight import InFlight
from lanewatch.collector.progress.report import ProgressReporter
from lanewatch.collector.record.sink import RecordSink
from lanewatch.collector.record.timing import RequestTiming

from .admission.classify import Classifier
from .admission.lane_models import LaneModels
from .admission.model_discovery import ModelLearner, fetch_models, refresh_safely, run_discovery
from .admission.model_ownership import Collision
from .admission.routing import RouteTable
from .ship.shipper import RecordShipper
from .stats import GatewayStats
from .tap.content_tap import ContentTap
from .tap.stream_scan import StreamTap
from .tap.tracing import GatewayTracing
from .upstream.pool import LanePool, Upstream
from .upstream.rescue_policy import RescuePolicy

__all__ = ["Gateway"]

log = logging.getLogger("lanewatch.gateway")


class Gateway:
    """Everything one gateway process knows; the HTTP handlers read and update it."""

    def __init__(
        self,
        cfg: GatewayConfig,
        on_record: RecordSink | None = None,
        metrics_text: Callable[[], tuple[bytes, str]] | None = None,
        record_content: bool = False,
        shipper: RecordShipper | None = None,
        ttft_slos: Mapping[str, float] | None = None,
    ) -> None:
        """`ttft_slos`: each lane's TTFT SLO (the SLO spec's), which the rescue of late requests reads."""
        if not cfg.lanes:
            raise ValueError("the gateway needs at least one lane (gateway.lanes or --upstream LANE=URL)")
        self.cfg = cfg
        self.lane_order = cfg.ordered_lanes
        self.routes = RouteTable.from_config(cfg)
        hint_token = read_secret_or_none(cfg.hints.token_file, "hints.token_file")
        self.classifier = Classifier.from_config(cfg, hint_token)
        self.models = LaneModels.from_config(cfg)
        self.pools = {
            name: LanePool.of(name, lane.upstreams, cfg.eject_after_failures)
            for name, lane in cfg.lanes.items()
        }
        self.ssl = {name: _ssl_for(lane) for name, lane in cfg.lanes.items()}
        self.api_keys = {
            name: read_secret_or_none(lane.api_key_file, f"lanes.{name}.api_key_file")
            for name, lane in cfg.lanes.items()
        }
        self.admin_token = read_secret_or_none(cfg.admin_token_file, "admin_token_file")
        self.degrade = DegradeState()
        self.shifter = Shifter(cfg.shift_mode, cfg.shift_seed)
        self.stats = GatewayStats(pools=list(self.pools.values()))
        self.tracing = GatewayTracing(cfg.otlp_endpoint)
        self.on_record = on_record
        self.shipper = shipper  # sends tap records to the collector; on_record feeds it
        # requests under way, reported to the collector's fast guard by `progress` (when it runs)
        self.in_flight = InFlight()
        self.rescue = RescuePolicy(cfg.rescue, self.lane_order, ttft_slos or {})
        self.settling: set[asyncio.Task[None]] = set()  # rescued requests whose late attempt still runs
        self.progress = self._progress_reporter()
        self.record_content = record_content  # prompt and response text on tap records and spans
        self.metrics_text = metrics_text
        self.upstream = UpstreamClient(cfg.connect_timeout_s)  # the data path's connections
        self.control: aiohttp.ClientSession | None = None  # health checks and /v1/models
        self._health_task: asyncio.Task[None] | None = None
        self.learner = self._learner()
        self._learn_task: asyncio.Task[None] | None = None
        self._models_changed()

    @property
    def tap_class(self) -> type[StreamTap]:
        """The tap each response is read through: the content tap with `record_content` on."""
        return ContentTap if self.record_content else StreamTap

    def set_degrade(self, lanes: dict[str, LaneDegrade], revision: int | None = None) -> DegradeState:
        """Replace the degrade state (already validated) at the sender's revision; returns the new state."""
        self.degrade = self.degrade.replaced(lanes, revision)
        self.stats.degrade_version = self.degrade.version
        return self.degrade

    def _progress_reporter(self) -> ProgressReporter | None:
        """The in-flight reporter towards the collector's fast guard; None without a collector or when off."""
        cfg = self.cfg
        interval = cfg.shipping.progress_interval_s
        if cfg.collector_url is None or interval is None:
            return None
        token = read_secret_or_none(cfg.collector_token_file, "collector_token_file")
        timeout = cfg.shipping.timeout_s
        return ProgressReporter(
            self.in_flight, cfg.collector_url, token, interval, timeout, prefix=cfg.reporter_name
        )

    def _learner(self) -> ModelLearner | None:
        """Lanes that declare no models learn them from their upstreams, unless turned off."""
        found = self.cfg.model_discovery
        undeclared = {
            name: [u.url for u in pool.upstreams]
            for name, pool in self.pools.items()
            if not self.cfg.lanes[name].models
        }
        if not found.enabled or not undeclared:
            return None
        learner = ModelLearner(undeclared, self._fetch_models, found.max_models)
        self.stats.model_discovery_failures = learner.failures  # counted there, read by /metrics
        return learner

    async def _fetch_models(self, lane: str, url: str) -> bytes:
        assert self.control is not None
        key = self.api_keys.get(lane)
        headers = {AUTHORIZATION: f"Bearer {key}"} if key is not None else {}
        found = self.cfg.model_discovery
        fetch = partial(fetch_models, self.control, url, headers=headers, tls=self.ssl[lane])
        return await fetch(timeout_s=found.timeout_s, max_bytes=found.max_bytes)

    def _models_changed(self) -> None:
        """Rebuild what depends on the lanes' models: the rewrite, routing by served model, /metrics."""
        learned = self.learner.models() if self.learner is not None else {}
        before = self.models
        self.models = LaneModels.from_config(self.cfg, learned, before.owners)
        _note_collisions(before.collisions, self.models, self.stats)
        default = self.routes.default_lane
        self.routes = replace(self.routes, served_elsewhere=self.models.served_elsewhere(default))
        served = self.models.served
        self.stats.lane_models = tuple(
            (lane, m, self.models.source(lane)) for lane in self.lane_order for m in served.get(lane, ())
        )

    def emit(self, record: RequestTiming) -> None:
        """Hand a finished request's record to the sink; a failing sink never breaks the proxy."""
        if self.on_record is None:
            return
        try:
            self.on_record(record)
        except Exception:
            log.exception("record sink failed")

    async def start(self) -> None:
        """Learn the lanes' models once, then start health checks; upstream connections open on demand."""
        check = min(self.cfg.health_interval_s, self.cfg.connect_timeout_s, 5.0)
        self.control = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=check))
        if self.learner is not None:  # the first round before the front listens: shifts find the models
            if await refresh_safely(self.learner):
                self._models_changed()
            interval = self.cfg.model_discovery.interval_s
            learning = run_discovery(self.learner, interval, self._models_changed)
            self._learn_task = asyncio.create_task(learning)
        self._health_task = asyncio.create_task(self._health_loop())
        if self.shipper is not None:
            self.shipper.start()
        if self.progress is not None:
            self.progress.start()

    async def shutdown(self) -> None:
        """Stop health checks, close sessions, send the last records and flush spans."""
        for settling in list(self.settling):  # a late loser's wait is cut short: its record still goes
            settling.cancel()
        if self.settling:
            await asyncio.gather(*self.settling, return_exceptions=True)
        for task in (self._health_task, self._learn_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.upstream.close()
        if self.control is not None:
            await self.control.close()
        if self.progress is not None:
            await self.progress.shutdown()
        if self.shipper is not None:
            await self.shipper.shutdown()  # after the front: every finished request's record is queued
        self.tracing.shutdown()

    async def check_health(self) -> None:
        """Probe every upstream's health path once."""
        ups = [(pool, u) for pool in self.pools.values() for u in pool.upstreams]
        results = await asyncio.gather(*(self._probe(pool.lane, u) for pool, u in ups))
        for (pool, u), ok in zip(ups, results, strict=True):
            was = u.healthy
            pool.checked(u, ok)
            if was != u.healthy:
                log.warning("upstream %s of lane %s is %s", u.name, pool.lane, "up" if ok else "down")

    async def _probe(self, lane: str, u: Upstream) -> bool:
        assert self.control is not None
        try:
            async with self.control.get(u.url + self.cfg.health_path, ssl=self.ssl[lane]) as resp:
                await resp.read()
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False

    async def _health_loop(self) -> None:
        while True:
            try:
                await self.check_health()
            except Exception:  # a bug here must not stop health checking for good
                log.exception("health check round failed")
            await asyncio.sleep(self.cfg.health_interval_s)


def _note_collisions(before: frozenset[Collision], models: LaneModels, stats: GatewayStats) -> None:
    """Log and count each collision new since the last change (not each refresh); log each one gone."""
    for c in sorted(models.collisions - before):
        how = "listed it first" if c.owner in models.learned else "declares it"
        log.warning(
            "model %r is listed by lane %s but lane %s owns it (%s): requests naming it go to %s",
            c.model, c.lane, c.owner, how, c.owner,
        )  # fmt: skip
        stats.model_collisions[c.lane] += 1
    for c in sorted(before - models.collisions):
        log.info("model %r: lane %s no longer collides with lane %s", c.model, c.lane, c.owner)


def _ssl_for(lane: LaneConfig) -> ssl.SSLContext:
    """How the lane's HTTPS upstreams are verified: a CA bundle, the system's, or not at all (-k)."""
    ctx = ssl.create_default_context(cafile=str(lane.cacert) if lane.cacert else None)
    if lane.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
