"""The tables of docs/diagnose.md, rendered from the registry and the thresholds model. Pure.

The page holds each table between `<!-- generated: NAME -->` and `<!-- end: NAME -->`; a test fails
when the page and these renderings differ, and `python -m lanewatch.collector.diagnose.docs PAGE`
rewrites them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from lanewatch.collector.diagnose.registry import CHECKS
from lanewatch.collector.diagnose.thresholds import Thresholds

__all__ = ["SECTIONS", "checks_table", "refresh", "thresholds_table"]


def checks_table() -> str:
    """One row per registered check: id, the cause it looks for, the data it needs."""
    rows = ["| check | looks for | needs |", "|---|---|---|"]
    rows += [
        f"| `{c.id}` | {c.title} | {', '.join(f'`{n}`' if ':' in n else n for n in c.needs)} |"
        for c in CHECKS
    ]
    return "\n".join(rows)


def thresholds_table() -> str:
    """One row per threshold: its name, default and what it bounds (with its source)."""
    rows = ["| threshold | default | meaning and source |", "|---|---|---|"]
    for name, info in Thresholds.model_fields.items():
        default = "none" if info.default is None else f"{info.default:g}"
        rows.append(f"| `{name}` | {default} | {info.description} |")
    return "\n".join(rows)


SECTIONS: dict[str, Callable[[], str]] = {"checks": checks_table, "thresholds": thresholds_table}


def refresh(page: str) -> str:
    """The page with every generated section re-rendered."""
    for name, render in SECTIONS.items():
        page = _section(page, name, render())
    return page


def _section(page: str, name: str, table: str) -> str:
    pattern = re.compile(rf"(<!-- generated: {name} -->\n).*?(\n<!-- end: {name} -->)", flags=re.S)
    if not pattern.search(page):
        raise ValueError(f"the page has no generated section {name!r}")
    return pattern.sub(lambda m: m.group(1) + table + m.group(2), page)


if __name__ == "__main__":  # pragma: no cover - the one-line regeneration command
    path = Path(sys.argv[1])
    path.write_text(refresh(path.read_text(encoding="utf-8")), encoding="utf-8")
