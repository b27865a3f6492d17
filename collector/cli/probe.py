"""`lanewatch probe URL`: a `curl -w` for LLMs: every phase of N streamed requests."""

from __future__ import annotations

import json
import sys
from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import typer

from lanewatch.collector.record.goodput import Goodput, Tally, outcome

from .app import app
from .fail import exit_code, fail

if TYPE_CHECKING:
    from rich.table import Table

    from lanewatch.collector.probe.settings import RequestClass, Target, Timeouts
    from lanewatch.collector.record.timing import RequestTiming

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
    slo_spec: Path | None = typer.Option(
        None,
        "--slo-spec",
        help="SLO spec whose latency SLOs for --lane judge goodput in the summary line "
        "(default: the bundled alerts/slos.yaml).",
        show_default=False,
    ),
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
    otlp_listen: str | None = typer.Option(
        None,
        "--otlp-listen",
        metavar="[HOST:]PORT",
        help="Receive vLLM's request spans (OTLP/HTTP, POST /v1/traces) on this address (host "
        "127.0.0.1 unless given; port 0 picks a free one) and join each to its probe by trace id, "
        "adding queue, prefill and decode. The URL to give vLLM is printed on stderr.",
    ),
    otlp_grpc_listen: str | None = typer.Option(
        None,
        "--otlp-grpc-listen",
        metavar="[HOST:]PORT",
        help="As --otlp-listen, over OTLP/gRPC: what vLLM sends when OTEL_EXPORTER_OTLP_TRACES_PROTOCOL "
        "is unset (4317 by convention). Either or both may be given.",
    ),
    join_wait: float = typer.Option(
        6.0,
        "--join-wait",
        min=0.0,
        metavar="S",
        help="With --otlp-listen or --otlp-grpc-listen: how long each request waits for its span (s). "
        "vLLM sends spans in batches every 5 s (OTEL_BSP_SCHEDULE_DELAY=5000 by default). "
        "A request whose span does not come in time (vLLM not sending here, a failed request, "
        "a lost span) keeps queue_s, prefill_s and decode_s null.",
    ),
) -> None:
    """Send N streamed requests to URL and show where the time went, phase by phase.

    Exits 1 if any request failed (each failure is reported with its error kind).
    """
    from pydantic import ValidationError

    from lanewatch.alerts.spec import DEFAULT_SPEC, SpecError, load_spec
    from lanewatch.collector.common import eventloop  # asyncio: loaded only to probe
    from lanewatch.collector.common.errors import LanewatchError
    from lanewatch.collector.config import load_config
    from lanewatch.collector.probe.session import ListenError
    from lanewatch.collector.probe.settings import Target, Timeouts
    from lanewatch.collector.record.goodput import from_spec

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
        judge = from_spec(load_spec(slo_spec or DEFAULT_SPEC))
    except ValidationError as exc:  # a flag value the target or its timeouts refuse
        fail("probe", "\n".join(["invalid settings:", *map(_problem, exc.errors())]))
    except SpecError as exc:
        fail("probe", f"--slo-spec: {exc}")
    except LanewatchError as exc:  # a --config that does not load
        fail("probe", exc)
    listen = _listen_address(otlp_listen, "--otlp-listen")
    grpc_listen = _listen_address(otlp_grpc_listen, "--otlp-grpc-listen")
    connection = "cold" if cold else "warm"
    run = _run(
        target,
        rclass,
        count,
        connection,
        timeouts,
        interval,
        json_out,
        otlp_endpoint,
        record_content,
        listen=listen,
        grpc_listen=grpc_listen,
        join_wait_s=join_wait,
    )
    try:
        records = eventloop.run(run)
    except ListenError as exc:
        value = otlp_listen if exc.option == "--otlp-listen" else otlp_grpc_listen
        fail("probe", f"{exc.option} {value}: {exc}", exit_code(exc))
    except LanewatchError as exc:  # an unreadable API key file
        fail("probe", exc)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if not json_out:
        from rich.console import Console

        listening = listen is not None or grpc_listen is not None
        table = summary_table(records, target, rclass.name, connection, server_rows=listening, judge=judge)
        Console().print(table)
        for line in error_lines(records):
            typer.echo(line, err=True)
    if any(not r.ok for r in records):
        raise typer.Exit(1)


def _request_class(name: str, cfg: Any) -> RequestClass:
    from lanewatch.collector.probe.settings import DEFAULT_CLASSES

    classes = {c.name: c for c in (cfg.probe.classes if cfg is not None else DEFAULT_CLASSES)}
    if name not in classes:
        raise typer.BadParameter(f"unknown class {name!r}; known: {', '.join(classes)}", param_hint="--class")
    return classes[name]


def _problem(error: Any) -> str:
    """One validation error as `  <field>: <message>`."""
    where = ".".join(str(p) for p in error["loc"])
    return f"  {where}: {str(error['msg']).removeprefix('Value error, ')}"


def _listen_address(value: str | None, option: str) -> tuple[str, int] | None:
    from lanewatch.collector.common.validation import parse_listen

    if value is None:
        return None
    try:
        return parse_listen(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


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
    *,
    listen: tuple[str, int] | None = None,
    grpc_listen: tuple[str, int] | None = None,
    join_wait_s: float = 6.0,
) -> list[RequestTiming]:
    from lanewatch.collector.probe.session import ProbeSession
    from lanewatch.exporters import otlp

    def emit(record: RequestTiming) -> None:
        if json_out:
            sys.stdout.write(json.dumps(record.to_json()) + "\n")
            sys.stdout.flush()

    provider = otlp.tracer_provider(otlp_endpoint, service_name="lanewatch-probe")
    session = ProbeSession(
        target,
        rclass,
        connection="cold" if connection == "cold" else "warm",
        timeouts=timeouts,
        tracer=provider.get_tracer("lanewatch.probe") if otlp_endpoint else None,
        record_content=record_content,
        join_wait_s=join_wait_s,
    )
    try:
        return await session.run(
            count,
            interval,
            emit,
            listen=listen,
            grpc_listen=grpc_listen,
            say=lambda m: typer.echo(m, err=True),
        )
    finally:
        otlp.shutdown(provider, timeout_s=2.0)


def summary_table(
    records: list[RequestTiming],
    target: Target,
    class_name: str,
    connection: str,
    *,
    server_rows: bool = False,
    judge: Goodput | None = None,
) -> Table:
    """p50/p95/p99 of every phase (ms) over the ok requests; queue/prefill/decode when asked or joined;
    with a judge, goodput (requests that met every latency SLO of the lane and did not fail)."""
    from rich.table import Table

    from lanewatch.collector.record.window import itl_summary, record_value, summarize

    ok = [r for r in records if r.ok]
    title = f"{target.url} · {target.model} · {class_name} · {connection}"
    table = Table(title=title, title_justify="left", min_width=len(title))
    for col in ("phase", "p50 ms", "p95 ms", "p99 ms", "n"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    rows = ROWS + tuple(
        s for s in SERVER_ROWS if server_rows or any(record_value(r, s) is not None for r in ok)
    )
    for name in rows:
        if name == "itl":
            s = itl_summary(ok)
        else:
            s = summarize(v for r in ok if (v := record_value(r, name)) is not None)
        if s is None:
            table.add_row(name, "-", "-", "-", "0")
        else:
            table.add_row(
                name, f"{s.p50 * 1e3:.2f}", f"{s.p95 * 1e3:.2f}", f"{s.p99 * 1e3:.2f}", str(s.count)
            )
    tokens = Counter(r.output_tokens for r in ok)
    shown = ", ".join(f"{k} ×{v}" for k, v in sorted(tokens.items(), key=str)) or "-"
    table.caption = f"ok {len(ok)}/{len(records)} · output tokens: {shown}"
    if server_rows:
        joined = sum(r.phases_source == "span" for r in ok)
        table.caption += f" · server spans joined {joined}/{len(ok)}"
    reported = sum(r.phases_source == "response" for r in ok)
    if reported:
        table.caption += f" · phases from vLLM's per-request metrics {reported}/{len(ok)}"
    if judge is not None:
        table.caption += f" · {goodput_text(judge, records, target.lane)}"
    table.caption_justify = "left"
    return table


def goodput_text(judge: Goodput, records: list[RequestTiming], lane: str) -> str:
    """ "goodput 97.0% (97/100 met every SLO of lane slow)", or why there is none."""
    bounds = judge.bounds.get(lane, ())
    if not bounds:
        return f"goodput: no latency SLO for lane {lane!r} (--lane, --slo-spec)"
    t = Tally()
    for r in records:
        t.add(outcome(judge, r))
    slos = ", ".join(f"{b.metric} ≤ {b.threshold_s:g}s" for b in bounds)
    ratio = "-" if t.ratio is None else f"{t.ratio:.1%}"
    return f"goodput {ratio} ({t.met}/{t.total} met {slos} and did not fail)"


def error_lines(records: list[RequestTiming]) -> list[str]:
    """One line per error kind with its count (and HTTP statuses seen), then the server's messages."""
    kinds = Counter(r.error.value for r in records if r.error is not None)
    lines = []
    for kind, n in sorted(kinds.items()):
        failed = [r for r in records if r.error and r.error.value == kind]
        statuses = sorted({r.status for r in failed if r.status})
        extra = f" (HTTP {', '.join(map(str, statuses))})" if statuses else ""
        lines.append(f"error {kind}: {n} of {len(records)}{extra}")
        messages = Counter(r.error_message for r in failed if r.error_message)
        for message, m in messages.most_common(3):  # already one line, <= 200 chars, redacted
            lines.append(f"  {m} × {message}" if m > 1 else f"  {message}")
    return lines
