"""`lanewatch gateway`'s entry point: build the gateway from its config, serve until a signal.

The CLI parses flags into a `GatewayConfig` and calls `serve`; everything the running gateway
needs (the record sinks, /metrics, the shipper, the records file) is wired here.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from functools import partial
from pathlib import Path

from lanewatch.collector.collect.settings import ExportConfig
from lanewatch.collector.common import eventloop
from lanewatch.collector.common.errors import ConfigError, StartupError
from lanewatch.collector.common.secrets import read_secret_or_none
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.record.files import RecordsWriter
from lanewatch.collector.record.sink import FanOut, RecordSink

from ..server import GatewayServer
from ..ship.shipper import RecordShipper
from ..state import Gateway
from .per_worker import records_path, worker_count

__all__ = [
    "ADMIN_INSECURE_WARNING",
    "Built",
    "StartupError",
    "build_gateway",
    "serve",
    "until_signalled",
]

log = logging.getLogger("lanewatch.gateway")
ADMIN_INSECURE_WARNING = (
    "--admin-insecure: /admin/degrade accepts changes WITHOUT authentication; anyone who can "
    "reach this port can shift, cap or shed traffic. Use --admin-token-file outside development."
)


class Built:
    """A gateway and the records file it appends to (closed after the gateway stops)."""

    def __init__(self, gateway: Gateway, records: RecordsWriter | None) -> None:
        self.gateway = gateway
        self.records = records

    def close_records(self) -> None:
        """Close the records file, if any."""
        if self.records is not None:
            self.records.close()


def serve(cfg: GatewayConfig, export: ExportConfig, records: Path | None) -> None:
    """Run the gateway until SIGINT or SIGTERM; ConfigError for a setting at fault, StartupError when the
    settings are fine but it cannot start (a taken port)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        eventloop.run(_run(cfg, export, records))


async def _run(cfg: GatewayConfig, export: ExportConfig, records: Path | None) -> None:
    count = worker_count(cfg)
    try:  # unreadable or empty secret files raise SecretError, a ConfigError, as they are
        built = build_gateway(cfg, export, records_path(records, 1, count))
    except OSError as exc:  # a records path that cannot be opened
        raise ConfigError(str(exc)) from None
    if count > 1:  # the settings are good: each worker builds its own gateway from them
        built.close_records()
        _check_records(records, count)
        from lanewatch.exporters.page_merge import merge_pages

        from .supervisor import run_supervised

        gw = built.gateway
        banner = partial(_banner, cfg, gw, workers=count)
        await run_supervised(cfg, export, records, count, merge_pages, banner)
        return
    gw = built.gateway
    server = GatewayServer(gw)
    try:
        await server.start(cfg.server.host, cfg.server.port)
    except OSError as exc:
        await server.shutdown()
        built.close_records()
        where = f"{cfg.server.host}:{cfg.server.port}"
        raise StartupError(f"cannot listen on {where}: {exc.strerror or exc}") from None
    _banner(cfg, gw, cfg.server.port, 1)
    # Everything built so far lives as long as the process: keep it out of the collector's
    # scans, so a full collection does not stall the streams that are passing through.
    gc.freeze()
    try:
        await until_signalled()
    finally:
        await server.shutdown(cfg.drain_timeout_s)
        built.close_records()


def _check_records(records: Path | None, count: int) -> None:
    """Every worker's records file opens (worker 1's did): a ConfigError now, not a worker's failure."""
    for slot in range(2, count + 1):
        path = records_path(records, slot, count)
        if path is not None:
            try:
                RecordsWriter(path).close()
            except OSError as exc:
                raise ConfigError(str(exc)) from None


async def until_signalled() -> None:
    """Until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def _banner(cfg: GatewayConfig, gw: Gateway, port: int, workers: int = 1) -> None:
    """The one line that says the gateway is up (and its insecure admin API's warning)."""
    if cfg.admin_insecure and gw.admin_token is None:
        log.warning(ADMIN_INSECURE_WARNING)
    admin = "on" if gw.admin_token or cfg.admin_insecure else "off"
    procs = f"; {workers} workers" if workers > 1 else ""
    print(
        f"lanewatch gateway on http://{cfg.server.host}:{port} lanes {', '.join(gw.lane_order)} "
        f"(default {gw.routes.default_lane}); admin API {admin}{procs}",
        file=sys.stderr,
        flush=True,
    )


def build_gateway(cfg: GatewayConfig, export: ExportConfig, records: Path | None) -> Built:
    """The gateway wired to /metrics and the records file; with a collector URL, to the collector instead
    of its own request metrics (the collector exports them, joined to vLLM's spans)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    from lanewatch.collector.collect.label_sets import closed_classes, closed_lanes
    from lanewatch.collector.collect.service import load_goodput
    from lanewatch.exporters.gateway import GatewayCollector, ShipperCollector
    from lanewatch.exporters.prometheus import RequestMetrics

    registry = CollectorRegistry()
    shipper = _shipper(cfg)
    sinks: list[RecordSink] = []
    metrics: RequestMetrics | None = None  # rendered through its own cached exposition
    if shipper is None:
        goodput = load_goodput(export.goodput, export.slo_spec)
        metrics = RequestMetrics(
            None,
            export.max_label_values,
            goodput,
            max_series=export.max_series,
            max_series_per_family=export.max_series_per_family,
            lanes=closed_lanes(export, cfg, (), goodput),
            classes=closed_classes(export, cfg),
        )
        sinks.append(metrics.observe)
    else:
        sinks.append(shipper.append)
        registry.register(ShipperCollector(shipper.stats))
    writer = RecordsWriter(records) if records is not None else None
    if writer is not None:
        sinks.append(writer.write)
    on_record = sinks[0] if len(sinks) == 1 else FanOut(sinks)
    gw = Gateway(
        cfg,
        on_record=on_record,
        metrics_text=lambda: (
            generate_latest(registry) + (metrics.exposition().encode() if metrics is not None else b""),
            CONTENT_TYPE_LATEST,
        ),
        record_content=export.record_content,
        shipper=shipper,
        ttft_slos=_ttft_slos(export),
    )
    registry.register(GatewayCollector(gw.stats))
    return Built(gw, writer)


def _ttft_slos(export: ExportConfig) -> dict[str, float]:
    """Each lane's TTFT SLO from the SLO spec (the bundled default without one): the rescue's deadlines."""
    from lanewatch.alerts.model import lane_ttft_thresholds
    from lanewatch.alerts.spec import DEFAULT_SPEC, load_spec

    return lane_ttft_thresholds(load_spec(export.slo_spec or DEFAULT_SPEC))


def _shipper(cfg: GatewayConfig) -> RecordShipper | None:
    """The record shipper towards gateway.collector_url, or None without one."""
    if cfg.collector_url is None:
        return None
    from ..ship.shipper import HttpPost

    token = read_secret_or_none(cfg.collector_token_file, "collector_token_file")
    post = HttpPost(cfg.collector_url, token, cfg.shipping.timeout_s)
    return RecordShipper(cfg.shipping, post)
