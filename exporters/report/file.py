"""A records.jsonl file (and the demo's summary.json) written out as one HTML report page.

Shared by `lanewatch report` and the demo; the caller chooses the goodput judge (an SLO spec).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.record.files import RecordFileError, read_records
from lanewatch.collector.record.goodput import Goodput

from .data import Event, SummaryError, build_report, parse_events
from .render import render_report

__all__ = ["SUMMARY_NAME", "ReportInputError", "ReportWritten", "write_report"]

SUMMARY_NAME = "summary.json"


class ReportInputError(ConfigError):
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
    judge: Goodput | None = None,
) -> ReportWritten:
    """Read records (and events from summary.json, given or beside the records) and write the HTML report;
    goodput is judged by `judge` (without one the report has no goodput table)."""
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
    data = build_report(read.records, events, source=str(records_path), bad_lines=len(bad), judge=judge)
    _write_atomically(output, render_report(data))
    return ReportWritten(output, len(read.records), len(events), summary, bad)


def _beside(records_path: Path) -> Path | None:
    candidate = records_path.parent / SUMMARY_NAME
    return candidate if candidate.is_file() else None


def _read_events(path: Path) -> tuple[Event, ...]:
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
