"""`lanewatch probe URL`: a `curl -w` for LLMs: every phase of N streamed requests."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import typer

from .app import app

if TYPE_CHECKING:
    from rich.table import Table

    from lanewatch.collector.config import RequestClass, Target, Timeouts
    from lanewatch.collector.timing import RequestTiming

# Rows of the summary table: (label, how to read it off a record).
ROWS: tuple[str, ...] = ("dns", "connect", "tls", "send", "ttfb", "ttft", "itl", "tpot", "e2e")
SERVER_ROWS: tuple[str, ...] = ("queue", "prefill", "decode")


class ApiChoice(StrEnum):
    chat = "chat"
    completions = "completions"


@app.command("probe", short_help="Probe an endpoint and show where the time went, by phase.")
def probe_command(
    url: str = typer.Argument(
        ..., help="Base URL of an OpenAI-compatible server, e.g. https://localhost:8000."
    ),
    model: str = typer.Option(..., "--model", "-m", help="Model name to request.", show_default=False),
    api: ApiChoice = typer.Option(ApiChoice.chat, "--api", help="Which streaming API to call."),
    class_name: str = typer.Option(
        "short", "--class", help="Request class: short, summary, story, or one defined in --config."
    ),
    count: int = typer.Option(
        1, "-n", "--count", min=1, help="How many requests to send, one after another."
    ),
    cold: bool = typer.Option(
        False,
        "--cold/--warm",
        help="--cold opens a new connection per request (DNS, connect and TLS every time); "
        "--warm reuses one, as production clients do.",
    ),
    cacert: Path | None = typer.Option(
        None, "--cacert", exists=True, dir_okay=False, help="Trust this CA bundle (PEM) for https."
    ),
    insecure: bool = typer.Option(False, "-k", "--insecure", help="Skip TLS certificate checks."),
    json_out: bool = typer.Option(
        False, "--json", help="Print one JSON object per request instead of a table."
    ),
    lane: str = typer.Option(
        "default", "--lane", help="Lane label; other than 'default' it is also sent as x-lanewatch-lane."
    ),
    api_key_file: Path | None = typer.Option(
        None, "--api-key-file", help="File holding an API key, sent as a Bearer token (never printed)."
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="Config file with request classes."),
    interval: float = typer.Option(0.0, "--interval", min=0.0, help="Seconds to pause between requests."),
    timeout_connect: float = typer.Option(
        5.0, "--timeout-connect", min=0.001, help="Limit for DNS + TCP, and for TLS (s)."
    ),
    timeout_ttft: float = typer.Option(
        30.0, "--timeout-ttft", min=0.001, help="Limit to the first token (s)."
    ),
    timeout_stall: float = typer.Option(
        10.0, "--timeout-stall", min=0.001, help="Longest gap between tokens (s)."
    ),
    timeout_total: float = typer.Option(120.0, "--timeout-total", min=0.001, help="Limit per request (s)."),
    otlp_endpoint: str | None = typer.Option(
        None, "--otlp-endpoint", help="Export client spans to this OTLP/HTTP traces URL."
    ),
    record_content: bool = typer.Option(
        False,
        "--record-content",
        help="Put the prompt and response text (16 KiB each at most) in --json records and spans.",
    ),
) -> None:
    """Send N streamed requests to URL and show where the time went, phase by phase.

    Exits 1 if any request failed (each failure is reported with its error kind).
    """
    from lanewatch.collector.config import ConfigError, Target, Timeouts, load_config

    if cacert is not None and insecure:
        raise typer.BadParameter("use either --cacert or -k/--insecure, not both", param_hint="--cacert")
    try:
        timeouts = Timeouts(
            connect_s=timeout_connect, ttft_s=timeout_ttft, stall_s=timeout_stall, total_s=timeout_total
        )
        rclass = _request_class(class_name, load_config(config) if config else None)
        target = Target(
            name=_target_name(url),
            url=url,
            lane=lane,
            model=model,
            api=api.value,
            cacert=cacert,
            insecure=insecure,
            api_key_file=api_key_file,
        )
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        connection = "cold" if cold else "warm"
        records = asyncio.run(
            _run(
                target, rclass, count, connection, timeouts, interval, json_out, otlp_endpoint, record_content
            )
        )
    except ValueError as exc:  # e.g. an unreadable API key file
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if not json_out:
        from rich.console import Console

        Console().print(summary_table(records, target, rclass.name, "cold" if cold else "warm"))
        for line in error_lines(records):
            typer.echo(line, err=True)
    if any(not r.ok for r in records):
        raise typer.Exit(1)


def _request_class(name: str, cfg: Any) -> RequestClass:
    from lanewatch.collector.config import DEFAULT_CLASSES

    classes = {c.name: c for c in (cfg.probe.classes if cfg is not None else DEFAULT_CLASSES)}
    if name not in classes:
        raise typer.BadParameter(f"unknown class {name!r}; known: {', '.join(classes)}", param_hint="--class")
    return classes[name]


def _target_name(url: str) -> str:
    parts = urlsplit(url)
    return (parts.netloc or url)[:64]


async def _run(
    target: Target,
    rclass: RequestClass,
    count: int,
    connection: str,
    timeouts: Timeouts,
    interval: float,
    json_out: bool,
    otlp_endpoint: str | None,
    record_content: bool = False,
) -> list[RequestTiming]:
    from lanewatch.collector.probe import Prober, spec_for
    from lanewatch.exporters import otlp

    provider = otlp.tracer_provider(otlp_endpoint, service_name="lanewatch-probe")
    records: list[RequestTiming] = []
    try:
        async with Prober(
            target,
            connection="cold" if connection == "cold" else "warm",
            timeouts=timeouts,
            tracer=provider.get_tracer("lanewatch.probe"),
            max_connections=1,
            record_content=record_content,
        ) as prober:
            for i in range(count):
                if i and interval:
                    await asyncio.sleep(interval)
                record = await prober.probe(spec_for(rclass, target, i))
                records.append(record)
                if json_out:
                    sys.stdout.write(json.dumps(record.to_json()) + "\n")
                    sys.stdout.flush()
    finally:
        otlp.shutdown(provider, timeout_s=2.0)
    return records


def summary_table(records: list[RequestTiming], target: Target, class_name: str, connection: str) -> Table:
    """p50/p95/p99 of every phase (ms) over the ok requests."""
    from rich.table import Table

    from lanewatch.collector.window import record_value, summarize

    ok = [r for r in records if r.ok]
    title = f"{target.url} · {target.model} · {class_name} · {connection}"
    table = Table(title=title, title_justify="left", min_width=len(title))
    for col in ("phase", "p50 ms", "p95 ms", "p99 ms", "n"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    rows = ROWS + tuple(s for s in SERVER_ROWS if any(record_value(r, s) is not None for r in ok))
    for name in rows:
        if name == "itl":
            values = [g for r in ok for g in r.itl_s]
        else:
            values = [v for r in ok if (v := record_value(r, name)) is not None]
        s = summarize(values)
        if s is None:
            table.add_row(name, "-", "-", "-", "0")
        else:
            table.add_row(
                name, f"{s.p50 * 1e3:.2f}", f"{s.p95 * 1e3:.2f}", f"{s.p99 * 1e3:.2f}", str(s.count)
            )
    tokens = Counter(r.output_tokens for r in ok)
    shown = ", ".join(f"{k} ×{v}" for k, v in sorted(tokens.items(), key=str)) or "-"
    table.caption = f"ok {len(ok)}/{len(records)} · output tokens: {shown}"
    table.caption_justify = "left"
    return table


def error_lines(records: list[RequestTiming]) -> list[str]:
    """One line per error kind with its count (and HTTP statuses seen)."""
    kinds = Counter(r.error.value for r in records if r.error is not None)
    lines = []
    for kind, n in sorted(kinds.items()):
        statuses = sorted({r.status for r in records if r.error and r.error.value == kind and r.status})
        extra = f" (HTTP {', '.join(map(str, statuses))})" if statuses else ""
        lines.append(f"error {kind}: {n} of {len(records)}{extra}")
    return lines
