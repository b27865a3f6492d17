"""`lanewatch report`: turn a records.jsonl file (and the demo's summary.json) into one HTML page."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .app import app

if TYPE_CHECKING:
    from lanewatch.collector.record.goodput import Goodput
    from lanewatch.exporters.report_data import Event

SUMMARY_NAME = "summary.json"
MAX_BAD_SHOWN = 10


class ReportInputError(Exception):
    """The report's input cannot be used; the message says which file and line or field."""


@dataclass(frozen=True, slots=True)
class ReportWritten:
    """What went into a written report."""

    output: Path
    records: int
    events: int
    summary: Path | None
    bad_lines: tuple[str, ...]  # "line N: why", for lines skipped with skip_bad


def write_report(
    records_path: Path,
    output: Path,
    summary_path: Path | None = None,
    *,
    skip_bad: bool = False,
    slo_spec: Path | None = None,
) -> ReportWritten:
    """Read records (and events from summary.json, given or beside the records) and write the HTML report;
    goodput is judged by the latency SLOs of `slo_spec` (default: the bundled alerts/slos.yaml)."""
    from lanewatch.collector.record.files import RecordFileError, read_records
    from lanewatch.exporters.report import render_report
    from lanewatch.exporters.report_data import build_report

    try:
        read = read_records(records_path, skip_bad=skip_bad)
    except RecordFileError as exc:
        raise ReportInputError(f"{records_path}: {exc} (use --skip-bad to skip such lines)") from None
    except OSError as exc:
        raise ReportInputError(f"{records_path}: cannot read: {exc.strerror or exc}") from None
    bad = tuple(str(e) for e in read.bad_lines)
    if not read.records:
        why = f"all {len(bad)} lines were bad" if bad else "the file is empty"
        raise ReportInputError(f"{records_path}: no records ({why}); nothing to report")
    summary = summary_path or _beside(records_path)
    events = _read_events(summary) if summary else ()
    judge = _goodput_judge(slo_spec)
    data = build_report(read.records, events, source=str(records_path), bad_lines=len(bad), judge=judge)
    _write_atomically(output, render_report(data))
    return ReportWritten(output, len(read.records), len(events), summary, bad)


def _goodput_judge(slo_spec: Path | None) -> Goodput:
    from lanewatch.alerts.spec import DEFAULT_SPEC, SpecError, load_spec
    from lanewatch.collector.record.goodput import from_spec

    try:
        return from_spec(load_spec(slo_spec or DEFAULT_SPEC))
    except SpecError as exc:
        raise ReportInputError(f"--slo-spec: {exc}") from None


def _beside(records_path: Path) -> Path | None:
    candidate = records_path.parent / SUMMARY_NAME
    return candidate if candidate.is_file() else None


def _read_events(path: Path) -> tuple[Event, ...]:
    from lanewatch.exporters.report_data import SummaryError, parse_events

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{path}: not JSON: {exc}") from None
    try:
        return parse_events(doc)
    except SummaryError as exc:
        raise ReportInputError(f"{path}: {exc}") from None


def _write_atomically(path: Path, content: str) -> None:
    """Write beside the target and rename, so a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # plain open: the umask sets the mode
    try:
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@app.command("report", short_help="Write a self-contained HTML report of a records file.")
def report(
    records: Path = typer.Argument(
        ..., help="A records.jsonl file (the demo's or a collector's).", show_default=False
    ),
    output: Path | None = typer.Option(
        None,
        "-o",
        "--output",
        help="Where to write the HTML (default: report.html beside RECORDS).",
        show_default=False,
    ),
    summary: Path | None = typer.Option(
        None,
        "--summary",
        help="summary.json whose `events` mark faults, alerts and degrades "
        "(default: summary.json beside RECORDS, when there is one).",
        show_default=False,
    ),
    skip_bad: bool = typer.Option(
        False,
        "--skip-bad",
        help="Skip lines that are not records (and count them) instead of stopping at the first.",
    ),
    slo_spec: Path | None = typer.Option(
        None,
        "--slo-spec",
        help="SLO spec whose latency SLOs judge goodput (default: the bundled alerts/slos.yaml).",
        show_default=False,
    ),
) -> None:
    """Write a self-contained HTML report of a records.jsonl file.

    The page works offline (inline SVG and CSS, no scripts): E2E per request class (flat latency),
    phases per lane, latency against output tokens with the fixed + per-token fit, P99 TTFT over
    time with fault, alert and degrade markers, the numbers in tables, and goodput per routed lane
    and class (the share of requests that met every latency SLO and did not fail).
    """
    out = output or records.parent / "report.html"
    try:
        done = write_report(records, out, summary, skip_bad=skip_bad, slo_spec=slo_spec)
    except ReportInputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for line in done.bad_lines[:MAX_BAD_SHOWN]:
        typer.echo(f"skipped {records}: {line}", err=True)
    if len(done.bad_lines) > MAX_BAD_SHOWN:
        typer.echo(f"skipped {len(done.bad_lines) - MAX_BAD_SHOWN} more bad lines", err=True)
    events = (
        f", {done.events} events from {done.summary}" if done.summary else ", no summary.json (no markers)"
    )
    skipped = f", {len(done.bad_lines)} bad lines skipped" if done.bad_lines else ""
    typer.echo(f"wrote {done.output}: {done.records} records{events}{skipped}")
