"""The tables of docs/diagnose.md, rendered from the registry, the evidence keys and the thresholds. Pure.

The page holds each table between `<!-- generated: NAME -->` and `<!-- end: NAME -->`; a test fails
when the page and these renderings differ, and `python -m lanewatch.collector.diagnose.docs PAGE`
rewrites them (`python -m tests.unit.collector.diagnose.example` rewrites them and the page's
worked example, the command's own output).
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from lanewatch.collector.diagnose.evidence import EVIDENCE, Need
from lanewatch.collector.diagnose.registry import CHECKS
from lanewatch.collector.diagnose.thresholds import CHOICE, Thresholds

__all__ = ["SECTIONS", "check_details", "checks_table", "evidence_table", "refresh", "thresholds_table"]

WIDTH = 100  # the page's line length


def _need(n: Need) -> str:
    return f"`{n}`" if isinstance(n, str) else " or ".join(f"`{k}`" for k in n)


def checks_table() -> str:
    """One row per registered check: id, the cause it looks for, its evidence keys and explainers."""
    rows = [
        "| check | looks for | needs | reads when there | live Prometheus | explained by |",
        "|---|---|---|---|---|---|",
    ]
    for c in CHECKS:
        needs = ", ".join(_need(n) for n in c.needs) or "-"
        reads = ", ".join(f"`{k}`" for k in c.reads) or "-"
        explained = ", ".join(f"`{i}`" for i in c.explained_by) or "-"
        live = "needed" if c.prometheus else "-"
        rows.append(f"| `{c.id}` | {c.title} | {needs} | {reads} | {live} | {explained} |")
    return "\n".join(rows)


def evidence_table() -> str:
    """One row per evidence key: what an `unknown` names when a lane lacks it, and its source."""
    rows = ["| key | an `unknown` names | from |", "|---|---|---|"]
    for key in EVIDENCE.values():
        source = "vLLM's series (Prometheus)" if key.prometheus else "records or lanewatch's series"
        rows.append(f"| `{key.key}` | {key.label} | {source} |")
    return "\n".join(rows)


def check_details() -> str:
    """One bullet per registered check: its own explanation, wrapped to the page's width."""
    return "\n".join(
        textwrap.fill(
            f"- **`{c.id}`**: {c.explanation}",
            WIDTH,
            subsequent_indent="  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        for c in CHECKS
    )


def thresholds_table() -> str:
    """One row per threshold: its name, default and what it bounds (with its source)."""
    rows = ["| threshold | default | meaning and source |", "|---|---|---|"]
    for name, info in Thresholds.model_fields.items():
        if name in CHOICE:  # which checks run, not a threshold: the page says so in prose
            continue
        default = "none" if info.default is None else f"{info.default:g}"
        rows.append(f"| `{name}` | {default} | {info.description} |")
    return "\n".join(rows)


SECTIONS: dict[str, Callable[[], str]] = {
    "checks": checks_table,
    "evidence": evidence_table,
    "check-details": check_details,
    "thresholds": thresholds_table,
}


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
