"""docs/diagnose.md's worked example, the command's own output: checked by the CLI test, rewritten here.

`python -m tests.unit.collector.diagnose.example` rewrites every generated part of the page: the
registry's tables (lanewatch.collector.diagnose.docs) and the example, which prints every check
and so changes when a check is added.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.diagnose import docs
from lanewatch.collector.record.files import record_line
from tests.layout import ROOT
from tests.unit.collector.diagnose.build import Shape, records

PAGE = ROOT / "docs" / "diagnose.md"
COMMAND = "$ lanewatch diagnose records.jsonl --lane slow\n"


def write_records(folder: Path, slow: Shape) -> Path:
    """The example's records file: a slow lane shaped `slow` and a healthy fast lane."""
    path = folder / "records.jsonl"
    rows = records(slow, lane="slow") + records(Shape(), lane="fast")
    path.write_text("".join(record_line(r) for r in rows), encoding="utf-8")
    return path


def output() -> str:
    """What the example's command prints for the demo's fault (a queue delay on the slow lane)."""
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as folder:
        write_records(Path(folder), Shape(queue=2.5))
        os.chdir(folder)  # the example names the file as the reader would type it
        try:
            return CliRunner().invoke(app, ["diagnose", "records.jsonl", "--lane", "slow"]).stdout
        finally:
            os.chdir(here)


def refresh(page: str) -> str:
    """The page with its generated tables and its example re-rendered."""
    page = docs.refresh(page)
    start = page.index(COMMAND) + len(COMMAND)
    return page[:start] + output() + page[page.index("```", start) :]


if __name__ == "__main__":  # pragma: no cover - the one-line regeneration command
    PAGE.write_text(refresh(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
