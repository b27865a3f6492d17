"""Every panel query of the generated dashboards, ready for a real Prometheus.

Grafana would substitute the template variables; here every variable is "All" (the
dashboards' allValue `.*`) and `$__rate_interval` is a fixed window that a 1 s scrape fills.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanewatch.dashboards.build import GENERATED_DIR

RATE_INTERVAL = "10s"  # Grafana: max(4 x scrape interval, step + scrape interval); the demo scrapes every 1 s
VARIABLES = {"target": ".*", "lane": ".*", "model": ".*"}


@dataclass(frozen=True)
class Panel:
    """One dashboard panel and its PromQL queries, variables substituted."""

    dashboard: str
    title: str
    exprs: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str]:
        """(dashboard uid, panel title)."""
        return (self.dashboard, self.title)


def substitute(expr: str, variables: Mapping[str, str] = VARIABLES) -> str:
    """The expression with $__rate_interval and $name / ${name} replaced."""
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)

    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in variables:
            raise KeyError(f"unknown dashboard variable ${name} in {expr!r}")
        return variables[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for p in panels:
        yield p
        yield from _panels(p.get("panels") or [])


def dashboard_panels(directory: Path = GENERATED_DIR) -> list[Panel]:
    """Every panel with a query in dashboards/generated/*.json."""
    out = []
    for path in sorted(directory.glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        for p in _panels(board.get("panels") or []):
            exprs = tuple(substitute(t["expr"]) for t in p.get("targets") or [] if t.get("expr"))
            if exprs:
                out.append(Panel(board["uid"], p["title"], exprs))
    return out
