"""`lanewatch gateway`: the lane router and passive tap in front of vLLM servers."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError

from lanewatch.collector.common.secrets import read_secret_or_none
from lanewatch.collector.config import ConfigError, ExportConfig, GatewayConfig, LaneConfig, load_config

from .app import app
from .fail import RUNTIME, USAGE, fail

_log = logging.getLogger("lanewatch.gateway")
ADMIN_INSECURE_WARNING = (
    "--admin-insecure: /admin/degrade accepts changes WITHOUT authentication; anyone who can "
    "reach this port can shift, cap or shed traffic. Use --admin-token-file outside development."
)

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from lanewatch.collector.gateway import Gateway, RecordSink
    from lanewatch.collector.gateway.shipper import RecordShipper
    from lanewatch.collector.record.timing import RequestTiming


@app.command("gateway", short_help="Route requests to lanes, apply degrades, tap every stream.")
def gateway(
    config: Path | None = typer.Option(
        None, "-c", "--config", help="YAML config file (its `gateway:` section)."
    ),
    host: str | None = typer.Option(None, "--host", help="Address to listen on (default: 127.0.0.1)."),
    port: int | None = typer.Option(None, "--port", help="Port to listen on (default: 8080)."),
    upstream: list[str] = typer.Option(
        [], "--upstream", help="LANE=URL; repeat for more lanes, or for more servers in one lane's pool."
    ),
    model: list[str] = typer.Option(
        [],
        "--model",
        help="LANE=NAME: a model the lane serves (repeat for more; the first is what requests shifted "
        "there are rewritten to). Replaces that lane's gateway.lanes.<lane>.models.",
    ),
    lane_order: str | None = typer.Option(
        None, "--lane-order", help="Lanes fastest first, comma separated (default: as first named)."
    ),
    default_lane: str | None = typer.Option(
        None, "--default-lane", help="Lane for requests no rule matches (default: the slowest)."
    ),
    admin_token_file: Path | None = typer.Option(
        None, "--admin-token-file", help="Bearer token for /admin/degrade; without it the admin API is off."
    ),
    admin_insecure: bool = typer.Option(
        False, "--admin-insecure", help="Serve /admin/degrade without a token (development only)."
    ),
    cacert: Path | None = typer.Option(None, "--cacert", help="CA bundle to verify HTTPS upstreams with."),
    insecure: bool = typer.Option(
        False, "-k", "--insecure", help="Do not verify HTTPS upstreams' certificates."
    ),
    otlp_endpoint: str | None = typer.Option(
        None, "--otlp-endpoint", help="OTLP/HTTP traces URL for a server span per request."
    ),
    records: Path | None = typer.Option(
        None, "--records", help="Append every tap record to this JSONL file."
    ),
    collector: str | None = typer.Option(
        None,
        "--collector",
        help="Ship tap records to this collector's POST /v1/records (base URL, gateway.collector_url); "
        "it joins them to vLLM's spans and exports their metrics, so this gateway's /metrics does not.",
    ),
    record_content: bool = typer.Option(
        False,
        "--record-content",
        help="Also record prompt and response text (16 KiB each at most) in tap records and spans "
        "(export.record_content); off by default.",
    ),
) -> None:
    """Route OpenAI requests to lanes, apply degrade state, stream answers through and tap them."""
    try:
        full = load_config(config)
        cfg = _gateway_config(
            full.gateway,
            host,
            port,
            upstream,
            model,
            lane_order,
            default_lane,
            admin_token_file,
            admin_insecure,
            cacert,
            insecure,
        )
        if otlp_endpoint:
            cfg = cfg.model_copy(update={"otlp_endpoint": otlp_endpoint})
        if collector:
            cfg = GatewayConfig.model_validate({**cfg.model_dump(), "collector_url": collector})
        # an unreadable or empty token file: say so now, not at the first send
        read_secret_or_none(cfg.collector_token_file, "collector_token_file")
    except ValidationError as exc:
        fail("gateway", "\n".join(["invalid settings:", *map(_problem, exc.errors())]))
    except (ConfigError, ValueError, OSError) as exc:
        fail("gateway", exc)
    export = full.export.model_copy(update={"record_content": True}) if record_content else full.export
    try:
        _serve(cfg, export, records or full.export.records_path)
    except StartupError as exc:
        fail("gateway", exc, exc.code)


class StartupError(Exception):
    """The gateway could not start; the message says what to fix, `code` is the exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _problem(error: Any) -> str:
    """One validation error as `  gateway.<field>: <message>`."""
    where = ".".join(str(p) for p in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"  gateway{'.' + where if where else ''}: {message}"


def _gateway_config(
    base: GatewayConfig,
    host: str | None,
    port: int | None,
    upstream: list[str],
    models: list[str],
    lane_order: str | None,
    default_lane: str | None,
    admin_token_file: Path | None,
    admin_insecure: bool,
    cacert: Path | None,
    insecure: bool,
) -> GatewayConfig:
    """The file's gateway section with the command line's flags laid over it."""
    data = base.model_dump()
    if upstream:
        data["lanes"] = _lanes_from_flags(upstream, cacert, insecure)
        data["lane_order"] = []
    elif cacert or insecure:
        data["lanes"] = {k: {**v, "cacert": cacert, "insecure": insecure} for k, v in data["lanes"].items()}
    for lane, names in _models_from_flags(models, set(data["lanes"])).items():
        data["lanes"][lane] = {**data["lanes"][lane], "models": names, "model_map": {}}
    if lane_order:
        data["lane_order"] = [s.strip() for s in lane_order.split(",") if s.strip()]
    server = dict(data["server"])
    if host:
        server["host"] = host
    if port is not None:
        server["port"] = port
    data["server"] = server
    for key, value in (("default_lane", default_lane), ("admin_token_file", admin_token_file)):
        if value is not None:
            data[key] = value
    data["admin_insecure"] = data["admin_insecure"] or admin_insecure
    cfg = GatewayConfig.model_validate(data)
    if not cfg.lanes:
        raise ValueError(
            "no lanes: give --upstream LANE=URL (repeatable) or a config file with gateway.lanes"
        )
    return cfg


def _lanes_from_flags(flags: list[str], cacert: Path | None, insecure: bool) -> dict[str, dict[str, object]]:
    lanes: dict[str, list[str]] = {}
    for flag in flags:
        lane, sep, url = flag.partition("=")
        if not sep or not lane or not url:
            raise ValueError(f"--upstream {flag!r}: expected LANE=URL, e.g. fast=http://127.0.0.1:8001")
        lanes.setdefault(lane.strip(), []).append(url.strip())
    return {
        lane: LaneConfig(upstreams=urls, cacert=cacert, insecure=insecure).model_dump()
        for lane, urls in lanes.items()
    }


def _models_from_flags(flags: list[str], lanes: set[str]) -> dict[str, list[str]]:
    """`--model LANE=NAME` flags -> each named lane's models, in the order given."""
    out: dict[str, list[str]] = {}
    for flag in flags:
        lane, sep, name = (part.strip() for part in flag.partition("="))
        if not sep or not lane or not name:
            raise ValueError(f"--model {flag!r}: expected LANE=NAME, e.g. fast=Qwen/Qwen2.5-0.5B-Instruct")
        if lane not in lanes:
            raise ValueError(f"--model {flag!r}: no lane {lane!r}; lanes: {', '.join(sorted(lanes))}")
        out.setdefault(lane, []).append(name)
    return out


def _serve(cfg: GatewayConfig, export: ExportConfig, records: Path | None) -> None:
    import asyncio
    import contextlib
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(_run(cfg, export, records))


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed: its C event loop halves the Python cost per streamed chunk."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _run(cfg: GatewayConfig, export: ExportConfig, records: Path | None) -> None:
    import asyncio
    import gc
    import signal

    from lanewatch.collector.gateway import GatewayServer

    try:  # unreadable or empty secret files, a records path that cannot be opened
        gw = _build_gateway(cfg, export, records)
    except (ValueError, OSError) as exc:
        raise StartupError(str(exc), USAGE) from None
    server = GatewayServer(gw)
    try:
        await server.start(cfg.server.host, cfg.server.port)
    except OSError as exc:
        await server.close()
        where = f"{cfg.server.host}:{cfg.server.port}"
        raise StartupError(f"cannot listen on {where}: {exc.strerror or exc}", RUNTIME) from None
    if cfg.admin_insecure and gw.admin_token is None:
        _log.warning(ADMIN_INSECURE_WARNING)
    admin = "on" if gw.admin_token or cfg.admin_insecure else "off"
    typer.echo(
        f"lanewatch gateway on http://{cfg.server.host}:{cfg.server.port} lanes {', '.join(gw.lane_order)} "
        f"(default {gw.routes.default_lane}); admin API {admin}",
        err=True,
    )
    # Everything built so far lives as long as the process: keep it out of the collector's
    # scans, so a full collection does not stall the streams that are passing through.
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.close()


def _build_gateway(cfg: GatewayConfig, export: ExportConfig, records: Path | None) -> Gateway:
    """The gateway wired to /metrics and the records file; with a collector URL, to the collector instead
    of its own request metrics (the collector exports them, joined to vLLM's spans)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    from lanewatch.collector.gateway import Gateway
    from lanewatch.exporters.gateway import GatewayCollector
    from lanewatch.exporters.prometheus import RequestMetrics

    registry = CollectorRegistry()
    shipper = _shipper(cfg)
    sinks: list[RecordSink] = []
    metrics: RequestMetrics | None = None  # rendered through its own cached exposition
    if shipper is None:
        from lanewatch.collector.collect.service import load_goodput

        goodput = load_goodput(export.goodput, export.slo_spec)
        metrics = RequestMetrics(
            None,
            export.max_label_values,
            goodput,
            max_series=export.max_series,
            max_series_per_family=export.max_series_per_family,
        )
        sinks.append(metrics.observe)
    else:
        from lanewatch.exporters.gateway import ShipperCollector

        sinks.append(shipper.append)
        registry.register(ShipperCollector(shipper.stats))
    if records is not None:
        sinks.append(_jsonl_sink(records))
    on_record = sinks[0] if len(sinks) == 1 else _fan_out(sinks)
    gw = Gateway(
        cfg,
        on_record=on_record,
        metrics_text=lambda: (
            generate_latest(registry) + (metrics.exposition().encode() if metrics is not None else b""),
            CONTENT_TYPE_LATEST,
        ),
        record_content=export.record_content,
        shipper=shipper,
    )
    registry.register(GatewayCollector(gw.stats))
    return gw


def _shipper(cfg: GatewayConfig) -> RecordShipper | None:
    """The record shipper towards gateway.collector_url, or None without one."""
    if cfg.collector_url is None:
        return None
    from lanewatch.collector.gateway.shipper import HttpPost, RecordShipper

    token = read_secret_or_none(cfg.collector_token_file, "collector_token_file")
    post = HttpPost(cfg.collector_url, token, cfg.shipping.timeout_s)
    return RecordShipper(cfg.shipping, post)


def _fan_out(sinks: list[RecordSink]) -> RecordSink:
    def on_record(record: RequestTiming) -> None:
        for sink in sinks:
            sink(record)

    return on_record


def _jsonl_sink(path: Path) -> RecordSink:
    from lanewatch.collector.record.files import open_for_append, record_line

    try:
        handle = open_for_append(path)
    except OSError as exc:
        raise OSError(f"records file {path}: cannot open: {exc.strerror or exc}") from None

    def write(record: RequestTiming) -> None:
        handle.write(record_line(record))

    return write
