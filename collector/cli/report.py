"""`lanewatch report`: turn a records.jsonl file (and the demo's summary.json) into one HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .app import app

if TYPE_CHECKING:
    from lanewatch.collector.record.goodput import Goodput

MAX_BAD_SHOWN = 10


def _goodput_judge(slo_spec: Path | None) -> Goodput:
    """The goodput judge of an SLO spec (default: the bundled alerts/slos.yaml)."""
    from lanewatch.alerts.spec import DEFAULT_SPEC, SpecError, load_spec
    from lanewatch.collector.record.goodput import from_spec
    from lanewatch.exporters.report.file import ReportInputError

    try:
        return from_spec(load_spec(slo_spec or DEFAULT_SPEC))
    except SpecError as exc:
        raise ReportInputError(f"--slo-spec: {exc}") from None


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
    # Imported here, not at the top: every command module is loaded to build the CLI.
    from lanewatch.exporters.report.file import ReportInputError, write_report

    out = output or records.parent / "report.html"
    try:
        done = write_report(records, out, summary, skip_bad=skip_bad, judge=_goodput_judge(slo_spec))
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
