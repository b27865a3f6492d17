"""docs/metrics.md's request-metrics table, rendered from the exporter's own table. Pure.

`FAMILIES` in request_metrics.py is the one place a per-request metric is written: its name,
help, buckets, labels, getter and docs row. The page holds the rendered table between
`<!-- generated: request-metrics -->` and `<!-- end: request-metrics -->`, the rest of it is
written by hand; a test fails when the committed table differs from this rendering, and
`python -m lanewatch.exporters.metrics_doc` rewrites it (a path argument: another page).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Final

from lanewatch.exporters import names
from lanewatch.exporters.request_metrics import FAMILIES

__all__ = ["COMMAND", "DOCS_PAGE", "SECTION", "refresh", "request_metrics_table"]

SECTION: Final = "request-metrics"
COMMAND: Final = "python -m lanewatch.exporters.metrics_doc"
# docs/metrics.md of a source checkout; absent from an installed wheel.
DOCS_PAGE: Final = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"


# The OpenTelemetry GenAI attribute a family's own label stands for, where one does.
_OTEL_LABEL: Final = {names.TOKENS_TOTAL: "gen_ai.token.type"}


def request_metrics_table() -> str:
    """One row per request-metrics family: name, type, what it counts, its OpenTelemetry GenAI name."""
    rows = ["| metric | type | what | OpenTelemetry GenAI |", "|---|---|---|---|"]
    for f in FAMILIES:
        rows.append(f"| `{f.name}` | {f.kind} | {f.doc} | {_otel(f.name)}|")
    return "\n".join(rows)


def _otel(name: str) -> str:
    """The OpenTelemetry cell, with its trailing space: empty where GenAI defines no equivalent."""
    metric = names.OTEL_EQUIVALENT.get(name)
    if metric is None:
        return ""
    label = _OTEL_LABEL.get(name)
    return f"`{metric}`" + (f" (`{label}`)" if label else "") + " "


def refresh(page: str) -> str:
    """The page with its request-metrics section rendered afresh; ValueError when it has none."""
    pattern = re.compile(rf"(<!-- generated: {SECTION} -->\n).*?(\n<!-- end: {SECTION} -->)", flags=re.S)
    if not pattern.search(page):
        raise ValueError(f"the page has no generated section {SECTION!r}")
    table = request_metrics_table()
    return pattern.sub(lambda m: m.group(1) + table + m.group(2), page, count=1)


if __name__ == "__main__":  # pragma: no cover - the one-line regeneration command
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS_PAGE
    path.write_text(refresh(path.read_text(encoding="utf-8")), encoding="utf-8")
