"""The live terminal view: per lane p50/p99 of every phase, SLO burn, alerts, degrade state, events.

`render` is a pure function from a `Snapshot` to a rich renderable (tests render it to text);
`event_line` is the one-line form `--no-live` prints as events happen.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from lanewatch.collector.record.window import Summary

from .events import Event
from .records import PHASES
from .timeline import Plan

__all__ = ["Snapshot", "event_line", "render", "stage_text"]

LINE_HIDDEN = ("starts_at", "version")  # in summary.json; noise on one line
EVENT_STYLE = {
    "fault_injected": "bold red",
    "alert_firing": "bold red",
    "degrade_applied": "bold yellow",
    "fault_cleared": "bold green",
    "alert_resolved": "bold green",
    "degrade_restored": "bold green",
}


@dataclass
class Snapshot:
    """Everything the view shows at one moment."""

    elapsed_s: float
    stage: str
    lanes: Mapping[str, Mapping[str, Summary]] = field(default_factory=dict)
    burn: Mapping[str, float] = field(default_factory=dict)  # lane -> TTFT burn rate (x budget)
    alerts: Sequence[str] = ()
    degrade: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    shifted: tuple[float, int] | None = None  # share of slow-routed requests the fast lane served, n
    traffic: str = ""
    events: Sequence[Event] = ()
    notes: Sequence[str] = ()
    started_at: float = 0.0
    diagnosis: str | None = None  # the faulted lane's top finding, once diagnosed


def _ms(s: Summary | None, q: str) -> str:
    if s is None:
        return "-"
    v = getattr(s, q) * 1000
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def lane_table(lanes: Mapping[str, Mapping[str, Summary]]) -> Table:
    """Phases down, lanes across: p50 / p99 in milliseconds over the last window."""
    table = Table(title="p50 / p99 ms, last 30 s", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("phase")
    for lane in lanes:
        table.add_column(f"{lane} lane", justify="right")
    for phase in PHASES:
        cells = [
            f"{_ms(stats.get(phase), 'p50')} / {_ms(stats.get(phase), 'p99')}" for stats in lanes.values()
        ]
        table.add_row(phase, *cells)
    table.add_row("requests", *(str(_count(stats)) for stats in lanes.values()), style="dim")
    return table


def _count(stats: Mapping[str, Summary]) -> int:
    e2e = stats.get("e2e")
    return e2e.count if e2e is not None else 0


def _state_table(snap: Snapshot) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    burn = ", ".join(f"{lane} {rate:.1f}x" for lane, rate in sorted(snap.burn.items())) or "-"
    table.add_row("TTFT SLO burn", burn)
    table.add_row(
        "alerts firing", Text(", ".join(snap.alerts) or "none", style="red" if snap.alerts else "green")
    )
    table.add_row("degrade", _degrade_text(snap.degrade))
    if snap.diagnosis is not None:
        table.add_row("top finding", Text(snap.diagnosis, style="bold"))
    if snap.shifted is not None:
        share, n = snap.shifted
        table.add_row("slow-lane traffic", f"{share:.0%} served by the fast lane (last {n} requests)")
    table.add_row("traffic", snap.traffic)
    return table


def _degrade_text(degrade: Mapping[str, Mapping[str, Any]]) -> Text:
    if not degrade:
        return Text("none: every lane serves its own traffic", style="green")
    parts = []
    for lane, on in sorted(degrade.items()):
        acts = []
        if "shift_to" in on:
            acts.append(f"shift {on['shift_percent']}% to {on['shift_to']}")
        if "cap_max_tokens" in on:
            acts.append(f"cap max_tokens {on['cap_max_tokens']}")
        if "shed_classes" in on:
            acts.append(f"shed {','.join(on['shed_classes'])}")
        parts.append(f"{lane}: {'; '.join(acts)}")
    return Text(" | ".join(parts), style="yellow")


def _clock(t: float) -> str:
    return dt.datetime.fromtimestamp(t).strftime("%H:%M:%S")


def event_line(e: Event, started_at: float = 0.0) -> str:
    """One event as a line of text: time, offset into the run, kind and details."""
    shown = {k: v for k, v in e.details.items() if v not in (None, "") and k not in LINE_HIDDEN}
    details = " ".join(f"{k}={v}" for k, v in shown.items())
    offset = f" +{e.t - started_at:5.1f}s" if started_at else ""
    return f"{_clock(e.t)}{offset}  {e.kind:<17} {details}"


def _events_text(snap: Snapshot, last: int = 8) -> Text:
    if not snap.events:
        return Text("(none yet)", style="dim")
    lines = [
        Text(event_line(e, snap.started_at), style=EVENT_STYLE.get(e.kind, "")) for e in snap.events[-last:]
    ]
    return Text("\n").join(lines)


def render(snap: Snapshot) -> RenderableType:
    """The whole view for one snapshot."""
    title = f"lanewatch demo  {snap.elapsed_s:5.0f}s  {snap.stage}"
    parts: list[RenderableType] = [lane_table(snap.lanes), _state_table(snap)]
    parts.append(Panel(_events_text(snap), title="events", title_align="left"))
    if snap.notes:
        parts.append(Text("\n".join(snap.notes), style="dim"))
    return Panel(Group(*parts), title=title, title_align="left")


def _fault_text(plan: Plan) -> str:
    return ", ".join(f"{k} {v}" for k, v in plan.fault.items())


def stage_text(happened: list[tuple[float, str]], plan: Plan, elapsed: float) -> str:
    """What the demo is waiting for, from the last event so far."""
    kinds = [k for _, k in happened]
    last = kinds[-1] if kinds else None
    return {
        None: f"warming up: the fault comes at {plan.warmup_s:.0f} s",
        "fault_injected": f"fault in the {plan.lane} lane ({_fault_text(plan)}): waiting for the alert",
        "alert_firing": "alert firing: waiting for the degrade controller",
        "degrade_applied": f"degraded: {plan.lane}-lane traffic goes to the fast lane; the fault clears soon",
        "fault_cleared": "fault cleared: waiting for the alert to resolve",
        "alert_resolved": "alert resolved: waiting for the controller to restore the lane",
        "degrade_restored": "restored: traffic back on its own lanes",
    }.get(last, f"{elapsed:.0f} s")
