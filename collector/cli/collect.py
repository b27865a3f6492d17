"""`lanewatch collect`: probe, scrape, receive vLLM spans and sample GPUs; serve /metrics."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from .app import app
from .fail import RUNTIME, fail


class LogLevel(StrEnum):
    """Log levels the collector accepts."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


@app.command("collect", short_help="Run probes, scrapes and the OTLP receiver; serve /metrics.")
def collect(
    config: Path | None = typer.Option(
        None,
        "-c",
        "--config",
        help="The YAML config file (see `lanewatch config check`). Without one, the defaults: no "
        "targets to probe or scrape, and the span, log and record receivers on 127.0.0.1:9464.",
    ),
    records: Path | None = typer.Option(
        None, "--records", help="Append every request record to this JSONL file (read by `lanewatch report`)."
    ),
    host: str | None = typer.Option(None, "--host", help="Address to listen on (default: server.host)."),
    port: int | None = typer.Option(
        None, "--port", min=0, max=65535, help="Port to listen on, 0 for any free one (default: server.port)."
    ),
    shard: str | None = typer.Option(
        None, "--shard", help="Own a stable share of the targets: i/N with 0 <= i < N (default: probe.shard)."
    ),
    otlp_grpc_listen: str | None = typer.Option(
        None,
        "--otlp-grpc-listen",
        metavar="[HOST:]PORT",
        help="Also receive vLLM's spans over OTLP/gRPC, vLLM's default protocol, on this address "
        "(4317 by convention; host 127.0.0.1 unless given; default: otlp.grpc_listen).",
    ),
    log_level: LogLevel = typer.Option(LogLevel.info, "--log-level", help="How much to log."),
) -> None:
    """Run the collector: GET /metrics, GET /healthz, POST /v1/traces (OTLP/HTTP) and POST /v1/records
    (record batches from the gateway), and OTLP/gRPC when given an address, until interrupted."""
    import logging

    from lanewatch.alerts.spec import SpecError
    from lanewatch.collector.collect.serve import run_until_signalled
    from lanewatch.collector.collect.service import load_goodput
    from lanewatch.collector.common import eventloop
    from lanewatch.collector.common.errors import LanewatchError
    from lanewatch.collector.common.settings import Flag, override
    from lanewatch.collector.config import load_config
    from lanewatch.collector.probe.suites import parse_shard

    logging.basicConfig(
        level=log_level.value.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for chatty in ("httpx", "httpcore"):  # one line per probe and scrape otherwise
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.getLogger().level))
    flags = {
        "server.host": Flag("--host", host),
        "server.port": Flag("--port", port),
        "probe.shard": Flag("--shard", shard),
        "export.records_path": Flag("--records", records),
        "otlp.grpc_listen": Flag("--otlp-grpc-listen", otlp_grpc_listen),
    }
    try:
        cfg = override(load_config(config), {path: f for path, f in flags.items() if f.value is not None})
    except LanewatchError as exc:  # a config file or a flag that cannot be used
        fail("collect", exc)
    try:
        parse_shard(cfg.probe.shard)
    except LanewatchError as exc:
        fail("collect", f"--shard: {exc}")
    if otlp_grpc_listen is not None:
        from lanewatch.collector.common.validation import parse_listen

        try:
            parse_listen(otlp_grpc_listen)
        except ValueError as exc:
            fail("collect", f"--otlp-grpc-listen: {exc}")
    try:
        load_goodput(cfg.export.goodput, cfg.export.slo_spec)  # refuse a bad SLO spec before anything starts
    except SpecError as exc:
        typer.echo(f"export.slo_spec: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        eventloop.run(
            run_until_signalled(cfg, lambda line: typer.echo(f"lanewatch collect: {line}", err=True))
        )
    except OSError as exc:  # a taken port
        fail("collect", exc, RUNTIME)
    except LanewatchError as exc:  # an unreadable or empty ingest token file exits 2
        fail("collect", exc)
