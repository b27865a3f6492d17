"""The report's four charts as pure functions from plain data to one <svg> each.

Every drawn datum carries class="mark" and a <title> tooltip, so a reader can hover for
the numbers and a test can count what a chart drew. A chart with nothing to draw says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .svg import (
    CHAR_W,
    Frame,
    LegendItem,
    Scale,
    clock_unit,
    esc,
    fmt_seconds,
    latency_unit,
    legend,
    nice_axis,
    no_data,
    num,
    shorten,
    svg_open,
    text,
    tooltip,
    x_axis,
    y_axis,
)


@dataclass(frozen=True, slots=True)
class BoxMark:
    """One box: the series (lane) it belongs to, its five numbers in seconds, and a tooltip."""

    series: str
    lo: float
    q1: float
    median: float
    q3: float
    hi: float
    note: str = ""


@dataclass(frozen=True, slots=True)
class BoxGroup:
    """Boxes side by side under one x label (a request class) with a second line under it."""

    label: str
    sublabel: str
    boxes: tuple[BoxMark, ...]


def box_chart(
    chart_id: str,
    groups: Sequence[BoxGroup],
    colors: Mapping[str, str],
    legend_items: Sequence[LegendItem],
    y_title: str,
) -> str:
    """Grouped box plots (whiskers lo–hi, box q1–q3, line at the median) on a latency axis."""
    frame = Frame(height=350, top=56, bottom=52)
    marks = [b for g in groups for b in g.boxes]
    if not marks:
        return no_data(chart_id, frame, y_title, "no successful requests with an E2E time")
    unit = latency_unit(max(b.hi for b in marks))
    lo, hi, ticks = nice_axis(0.0, unit.of(max(b.hi for b in marks)))
    y = Scale(lo, hi, frame.y1, frame.y0)
    out = [svg_open(chart_id, frame, y_title), y_axis(frame, y, ticks, f"{y_title} ({unit.name})")]
    out.append(
        f'<line class="axis" x1="{num(frame.x0)}" x2="{num(frame.x1)}" '
        f'y1="{num(frame.y1)}" y2="{num(frame.y1)}"/>'
    )
    slot = (frame.x1 - frame.x0) / len(groups)
    for i, g in enumerate(groups):
        gx = frame.x0 + i * slot
        width = min(56.0, slot * 0.8 / max(len(g.boxes), 1))
        start = gx + (slot - width * len(g.boxes)) / 2
        for j, b in enumerate(g.boxes):
            bx = start + j * width + width * 0.1
            out.append(_box(b, bx, width * 0.8, lambda v: y(unit.of(v)), colors.get(b.series, "#888")))
        out.append(text(gx + slot / 2, frame.y1 + 18, g.label, "group-label", "middle"))
        out.append(text(gx + slot / 2, frame.y1 + 33, g.sublabel, "tick", "middle"))
    out.append(legend(legend_items, frame.x0, 18, frame.x1 - frame.x0))
    out.append("</svg>")
    return "".join(out)


ToPx = Callable[[float], float]


def _box(b: BoxMark, x: float, w: float, px: ToPx, color: str) -> str:
    lo, q1, med, q3, hi = (px(v) for v in (b.lo, b.q1, b.median, b.q3, b.hi))
    cx = x + w / 2
    c = esc(color)
    return (
        f'<g class="mark">{tooltip(b.note)}'
        f'<line x1="{num(cx)}" x2="{num(cx)}" y1="{num(hi)}" y2="{num(lo)}" stroke="{c}" stroke-width="1.5"/>'
        f'<line x1="{num(cx - w / 4)}" x2="{num(cx + w / 4)}" y1="{num(hi)}" y2="{num(hi)}" stroke="{c}"/>'
        f'<line x1="{num(cx - w / 4)}" x2="{num(cx + w / 4)}" y1="{num(lo)}" y2="{num(lo)}" stroke="{c}"/>'
        f'<rect x="{num(x)}" y="{num(q3)}" width="{num(w)}" height="{num(max(q1 - q3, 1.0))}" '
        f'fill="{c}" fill-opacity="0.35" stroke="{c}" stroke-width="1.5"/>'
        f'<line x1="{num(x)}" x2="{num(x + w)}" y1="{num(med)}" y2="{num(med)}" '
        f'stroke="{c}" stroke-width="3"/>'
        "</g>"
    )


LABEL_CHARS = 28  # longer lane names are shortened beside the bars (the tooltip has them whole)


@dataclass(frozen=True, slots=True)
class StackedBar:
    """One horizontal bar (a lane) made of named parts in seconds, with a note at its end."""

    label: str
    parts: tuple[tuple[str, float], ...]
    note: str = ""


def stacked_bar_chart(
    chart_id: str, bars: Sequence[StackedBar], part_colors: Mapping[str, str], x_title: str
) -> str:
    """Horizontal stacked bars, one per lane, parts in the given order, legend of the parts used."""
    label_w = min(max((len(b.label) for b in bars), default=4), LABEL_CHARS) * CHAR_W * 1.15 + 24  # bold
    frame = Frame(height=70 + 44 * max(len(bars), 1) + 40, left=label_w, right=150, top=56, bottom=48)
    totals = [sum(v for _, v in b.parts) for b in bars]
    if not bars or max(totals) <= 0:
        return no_data(chart_id, frame, x_title, "no successful requests with TTFT and E2E")
    unit = latency_unit(max(totals))
    lo, hi, ticks = nice_axis(0.0, unit.of(max(totals)))
    x = Scale(lo, hi, frame.x0, frame.x1)
    out = [svg_open(chart_id, frame, x_title)]
    for t in ticks:
        out.append(
            f'<line class="grid" x1="{num(x(t))}" x2="{num(x(t))}" '
            f'y1="{num(frame.y0)}" y2="{num(frame.y1)}"/>'
        )
    out.append(x_axis(frame, x, ticks, f"{x_title} ({unit.name})"))
    row = (frame.y1 - frame.y0) / len(bars)
    for i, (bar, total) in enumerate(zip(bars, totals, strict=True)):
        top = frame.y0 + i * row + row * 0.2
        label = text(frame.x0 - 8, top + row * 0.3 + 4, shorten(bar.label, LABEL_CHARS), "group-label", "end")
        out.append(f"<g>{tooltip(bar.label)}{label}</g>")
        cursor = 0.0
        for part, value in bar.parts:
            x0, x1 = x(unit.of(cursor)), x(unit.of(cursor + value))
            share = value / total if total else 0.0
            tip = f"{bar.label} · {part}: {fmt_seconds(value)} ({share:.0%} of e2e)"
            out.append(
                f'<rect class="mark" x="{num(x0)}" y="{num(top)}" width="{num(max(x1 - x0, 0.5))}" '
                f'height="{num(row * 0.6)}" fill="{esc(part_colors.get(part, "#888"))}">{tooltip(tip)}</rect>'
            )
            if x1 - x0 > CHAR_W * (len(part) + 1):
                out.append(text((x0 + x1) / 2, top + row * 0.3 + 4, part, "bar-label", "middle"))
            cursor += value
        out.append(text(x(unit.of(total)) + 6, top + row * 0.3 + 4, bar.note, "tick"))
    used = [p for p in part_colors if any(p == name for b in bars for name, _ in b.parts)]
    items = [LegendItem(p, part_colors[p]) for p in used]
    out.append(legend(items, frame.x0, 18, frame.x1 - frame.x0 + frame.right))
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class PointSeries:
    """Scatter points of one series (lane), (x, seconds), and its fit line (fixed, per x) if any."""

    name: str
    points: tuple[tuple[float, float], ...]
    fit: tuple[float, float] | None = None


def scatter_chart(
    chart_id: str,
    series: Sequence[PointSeries],
    colors: Mapping[str, str],
    legend_items: Sequence[LegendItem],
    x_title: str,
    y_title: str,
) -> str:
    """Points per series with each series' fit drawn as a dashed line across the x range."""
    frame = Frame(height=380, top=74)
    pts = [p for s in series for p in s.points]
    if not pts:
        return no_data(chart_id, frame, y_title, "no successful requests with output tokens")
    unit = latency_unit(max(y for _, y in pts))
    xlo, xhi, xticks = nice_axis(0.0, max(x for x, _ in pts))
    ylo, yhi, yticks = nice_axis(0.0, unit.of(max(y for _, y in pts)))
    x, y = Scale(xlo, xhi, frame.x0, frame.x1), Scale(ylo, yhi, frame.y1, frame.y0)
    out = [svg_open(chart_id, frame, y_title), y_axis(frame, y, yticks, f"{y_title} ({unit.name})")]
    out.append(x_axis(frame, x, xticks, x_title))
    for s in series:
        c = esc(colors.get(s.name, "#888"))
        out.append(f'<g fill="{c}" fill-opacity="0.45">')
        for px, py in s.points:
            out.append(
                f'<circle class="mark" cx="{num(x(px))}" cy="{num(y(unit.of(py)))}" r="2.6">'
                f"{tooltip(f'{s.name}: {px:g} tokens, {fmt_seconds(py)}')}</circle>"
            )
        out.append("</g>")
    clip_id = f"plot-{chart_id}"
    out.append(
        f'<clipPath id="{esc(clip_id)}"><rect x="{num(frame.x0)}" y="{num(frame.y0)}" '
        f'width="{num(frame.x1 - frame.x0)}" height="{num(frame.y1 - frame.y0)}"/></clipPath>'
    )
    for s in series:
        if s.fit is not None:
            to_px = lambda v: y(unit.of(v))  # noqa: E731
            out.append(_fit_line(s.fit, x, to_px, colors.get(s.name, "#888"), clip_id))
    out.append(legend(legend_items, frame.x0, 16, frame.x1 - frame.x0))
    out.append("</svg>")
    return "".join(out)


def _fit_line(fit: tuple[float, float], x: Scale, y: ToPx, color: str, clip_id: str) -> str:
    """The fit across the x range; the plot's clip path cuts it where it leaves the y range."""
    fixed, slope = fit
    return (
        f'<line class="fit" clip-path="url(#{esc(clip_id)})" x1="{num(x(x.d0))}" x2="{num(x(x.d1))}" '
        f'y1="{num(y(fixed + slope * x.d0))}" y2="{num(y(fixed + slope * x.d1))}" '
        f'stroke="{esc(color)}" stroke-width="2" stroke-dasharray="6 4"/>'
    )


@dataclass(frozen=True, slots=True)
class LineSeries:
    """A series of (x, seconds or None); None breaks the line."""

    name: str
    points: tuple[tuple[float, float | None], ...]


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical line at x (seconds since start) for one event."""

    x: float
    color: str
    dashed: bool
    label: str


@dataclass(frozen=True, slots=True)
class Band:
    """An interval on a named strip row above the plot (e.g. alert firing from x0 to x1)."""

    row: str
    x0: float
    x1: float
    color: str
    label: str


def timeline_chart(
    chart_id: str,
    series: Sequence[LineSeries],
    colors: Mapping[str, str],
    markers: Sequence[Marker],
    bands: Sequence[Band],
    legend_items: Sequence[LegendItem],
    y_title: str,
) -> str:
    """Lines over time (x in seconds since start) with event markers and a strip of intervals."""
    rows = list(dict.fromkeys(b.row for b in bands))
    frame = Frame(height=400 + 16 * len(rows), top=82 + 16 * len(rows))
    values = [v for s in series for _, v in s.points if v is not None]
    if not values:
        return no_data(chart_id, frame, y_title, "no timestamped successful requests with a TTFT")
    xs = [px for s in series for px, _ in s.points] + [m.x for m in markers] + [b.x1 for b in bands]
    cu = clock_unit(max(xs) - min(xs))
    xlo, xhi, xticks = nice_axis(cu.of(min(0.0, *xs)), cu.of(max(xs)), 8)
    unit = latency_unit(max(values))
    ylo, yhi, yticks = nice_axis(0.0, unit.of(max(values)))
    x, y = Scale(xlo, xhi, frame.x0, frame.x1), Scale(ylo, yhi, frame.y1, frame.y0)
    out = [svg_open(chart_id, frame, y_title), y_axis(frame, y, yticks, f"{y_title} ({unit.name})")]
    out.append(x_axis(frame, x, xticks, f"time since the first request ({cu.name})"))
    for i, row in enumerate(rows):
        top = frame.y0 - 16 * (len(rows) - i) - 10
        out.append(text(frame.x0 - 6, top + 10, row, "tick", "end"))
        for b in (b for b in bands if b.row == row):
            out.append(
                f'<rect class="band" x="{num(x(cu.of(b.x0)))}" y="{num(top)}" '
                f'width="{num(max(x(cu.of(b.x1)) - x(cu.of(b.x0)), 2.0))}" height="12" rx="2" '
                f'fill="{esc(b.color)}">{tooltip(b.label)}</rect>'
            )
    for m in markers:
        mx = num(x(cu.of(m.x)))
        dash = ' stroke-dasharray="5 4"' if m.dashed else ""
        out.append(
            f'<line class="marker" x1="{mx}" x2="{mx}" y1="{num(frame.y0)}" y2="{num(frame.y1)}" '
            f'stroke="{esc(m.color)}" stroke-width="1.5"{dash}>{tooltip(m.label)}</line>'
        )
    for s in series:
        out.extend(_polylines(s, lambda v: x(cu.of(v)), lambda v: y(unit.of(v)), colors.get(s.name, "#888")))
    out.append(legend(legend_items, frame.x0, 16, frame.x1 - frame.x0))
    out.append("</svg>")
    return "".join(out)


def _polylines(s: LineSeries, px: ToPx, py: ToPx, color: str) -> list[str]:
    runs: list[list[tuple[float, float]]] = [[]]
    for xv, yv in s.points:
        if yv is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((px(xv), py(yv)))
    out = []
    for run in (r for r in runs if r):
        coords = " ".join(f"{num(a)},{num(b)}" for a, b in run)
        tip = (
            f"{s.name}: rolling P99 TTFT, peak {fmt_seconds(max(yv for _, yv in s.points if yv is not None))}"
        )
        if len(run) == 1:
            a, b = run[0]
            out.append(
                f'<circle class="mark" cx="{num(a)}" cy="{num(b)}" r="3" fill="{esc(color)}">'
                f"{tooltip(tip)}</circle>"
            )
        else:
            out.append(
                f'<polyline class="mark" points="{coords}" fill="none" stroke="{esc(color)}" '
                f'stroke-width="2.2">{tooltip(tip)}</polyline>'
            )
    return out
