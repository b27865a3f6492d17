"""Panel builders that insist on what every lanewatch panel needs: a description (what it shows,
what to do when red), a unit and thresholds; plus a flow layout and the dashboard frame."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import attr
from grafanalib.core import (
    Dashboard,
    GridPos,
    Panel,
    Repeat,
    Stat,
    StateTimeline,
    Target,
    Time,
    TimeSeries,
)

from .templating import DATASOURCE, variables

# Threshold steps: (color, lower bound); the first step's bound is None (from -inf).
Steps = Sequence[tuple[str, float | None]]
WIDTH: Final = 24
SCHEMA_VERSION: Final = 39
TAG: Final = "lanewatch"


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL expression and its legend."""

    expr: str
    legend: str = ""


def _steps(steps: Steps) -> list[dict[str, Any]]:
    if not steps or steps[0][1] is not None:
        raise ValueError("thresholds start with a base step (color, None)")
    return [{"color": color, "value": value} for color, value in steps]


def _targets(queries: Sequence[Query]) -> list[Target]:
    return [
        Target(expr=q.expr, legendFormat=q.legend, refId=chr(ord("A") + i), datasource=DATASOURCE)
        for i, q in enumerate(queries)
    ]


def _check(description: str, unit: str) -> None:
    if "red" not in description.lower() or not unit:
        raise ValueError("every panel needs a unit and a description that says what to do when it is red")


def timeseries(
    title: str,
    description: str,
    queries: Sequence[Query],
    unit: str,
    steps: Steps,
    *,
    w: int = 12,
    h: int = 8,
    stack: bool = False,
    bars: bool = False,
    repeat: str | None = None,
) -> TimeSeries:
    """A time series panel; threshold lines drawn, stacked areas when `stack`."""
    _check(description, unit)
    return TimeSeries(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=_targets(queries),
        unit=unit,
        thresholds=_steps(steps),
        thresholdsStyleMode="line" if len(steps) > 1 else "off",
        stacking={"mode": "normal", "group": "A"} if stack else {},
        fillOpacity=60 if stack else (80 if bars else 10),
        drawStyle="bars" if bars else "line",
        legendDisplayMode="table" if len(queries) > 1 else "list",
        legendPlacement="bottom",
        legendCalcs=["lastNotNull", "max"],
        tooltipMode="multi",
        gridPos=GridPos(h=h, w=w, x=0, y=0),
        repeat=Repeat(direction="h", variable=repeat, maxPerRow=2) if repeat else Repeat(),
        maxDataPoints=None,
    )


def stat(
    title: str,
    description: str,
    queries: Sequence[Query],
    unit: str,
    steps: Steps,
    *,
    w: int = 6,
    h: int = 5,
    graph: bool = True,
) -> Stat:
    """A single-value panel colored by its thresholds."""
    _check(description, unit)
    return Stat(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=_targets(queries),
        format=unit,
        thresholds=_steps(steps),
        colorMode="background",
        graphMode="area" if graph else "none",
        reduceCalc="lastNotNull",
        textMode="value_and_name" if any(q.legend for q in queries) else "auto",
        gridPos=GridPos(h=h, w=w, x=0, y=0),
        maxDataPoints=None,
    )


def timeline(
    title: str,
    description: str,
    queries: Sequence[Query],
    unit: str,
    steps: Steps,
    *,
    w: int = WIDTH,
    h: int = 7,
    mappings: Sequence[tuple[str, str, str]] = (),
) -> StateTimeline:
    """A state timeline; `mappings` are (value, text, color)."""
    _check(description, unit)
    value_mappings = [
        {"type": "value", "options": {value: {"text": text, "color": color}}}
        for value, text, color in mappings
    ]
    return StateTimeline(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=_targets(queries),
        thresholds=_steps(steps),
        mappings=value_mappings,
        gridPos=GridPos(h=h, w=w, x=0, y=0),
        extraJson={"fieldConfig": {"defaults": {"unit": unit}}},
        maxDataPoints=None,
    )


def layout(panels: Sequence[Panel]) -> list[Panel]:
    """Place panels left to right, wrapping at the dashboard width; a row is as tall as its tallest panel."""
    placed: list[Panel] = []
    x = y = row_h = 0
    for panel in panels:
        pos = panel.gridPos
        if x + pos.w > WIDTH:
            x, y, row_h = 0, y + row_h, 0
        placed.append(attr.evolve(panel, gridPos=GridPos(h=pos.h, w=pos.w, x=x, y=y)))
        x, row_h = x + pos.w, max(row_h, pos.h)
    return placed


def dashboard(uid: str, title: str, description: str, panels: Sequence[Panel]) -> Dashboard:
    """A lanewatch dashboard: shared variables, links to its siblings, panels laid out with ids."""
    return Dashboard(
        uid=uid,
        title=title,
        description=description,
        tags=[TAG],
        templating=variables(),
        panels=layout(panels),
        links=[
            {
                "type": "dashboards",
                "tags": [TAG],
                "asDropdown": True,
                "title": "lanewatch",
                "includeVars": True,
                "keepTime": True,
            }
        ],
        refresh="30s",
        time=Time("now-1h", "now"),
        timezone="browser",
        schemaVersion=SCHEMA_VERSION,
        editable=True,
    ).auto_panel_ids()
