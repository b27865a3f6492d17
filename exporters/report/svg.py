"""Pure SVG building blocks for the report: scales, ticks, units, axes, legends; data in, markup out.

Every function returns well-formed XML text with every piece of user text escaped, so a
chart can be embedded in HTML as is and parsed back by tests.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

# Okabe–Ito based: tells lanes apart for most colour-blind readers, too.
LANE_PALETTE: tuple[str, ...] = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#D55E00",
    "#56B4E9",
    "#8C564B",
    "#7F7F7F",
)
CHAR_W = 6.6  # rough width of one 12px sans-serif character, for laying out labels


# Characters an HTML page or an SVG (XML 1.0) must not carry raw: C0 controls but tab, LF
# and CR, DEL, C1 controls, lone surrogates (not encodable as UTF-8) and U+FFFE/U+FFFF.
# A character reference does not help (`&#0;` is itself a parse error), so each one is
# shown as a visible `\xNN` / `\uNNNN` escape instead.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def esc(text: object) -> str:
    """Text escaped for XML/HTML content and attribute values, control characters made visible."""
    return _UNSAFE.sub(_visible, html.escape(str(text), quote=True))


def shorten(label: str, max_chars: int) -> str:
    """The label cut to max_chars with an ellipsis when longer."""
    return label if len(label) <= max_chars else label[: max_chars - 1] + "…"


def lane_colors(names: Sequence[str]) -> dict[str, str]:
    """A stable colour per name, in the order given."""
    return {name: LANE_PALETTE[i % len(LANE_PALETTE)] for i, name in enumerate(names)}


def num(v: float) -> str:
    """A coordinate with at most two decimals and no trailing zeros."""
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


@dataclass(frozen=True, slots=True)
class Scale:
    """Maps the domain [d0, d1] linearly onto the range [r0, r1]."""

    d0: float
    d1: float
    r0: float
    r1: float

    def __call__(self, v: float) -> float:
        if self.d1 == self.d0:
            return (self.r0 + self.r1) / 2
        return self.r0 + (v - self.d0) * (self.r1 - self.r0) / (self.d1 - self.d0)


def nice_axis(lo: float, hi: float, count: int = 5) -> tuple[float, float, list[float]]:
    """A domain widened to round steps around [lo, hi], and its ticks (about `count`)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    start = math.floor(lo / step + 1e-9) * step
    end = math.ceil(hi / step - 1e-9) * step
    n = round((end - start) / step)
    ticks = [round(start + i * step, 10) for i in range(n + 1)]
    return start, end, ticks


def tick_label(v: float) -> str:
    """A tick value without float noise: 0.25, 2, 1500."""
    if v == 0:
        return "0"
    text = f"{v:.6g}"
    return text if "e" not in text else f"{v:g}"


@dataclass(frozen=True, slots=True)
class Unit:
    """A display unit for a quantity held in seconds."""

    name: str
    per_second: float  # value in this unit = seconds × per_second

    def of(self, seconds: float) -> float:
        """Seconds in this unit."""
        return seconds * self.per_second


def latency_unit(max_seconds: float) -> Unit:
    """Milliseconds below one second, else seconds."""
    return Unit("ms", 1000.0) if max_seconds < 1.0 else Unit("s", 1.0)


def clock_unit(span_seconds: float) -> Unit:
    """Seconds for a span up to 15 minutes, minutes up to 6 hours, else hours."""
    if span_seconds <= 900:
        return Unit("s", 1.0)
    if span_seconds <= 6 * 3600:
        return Unit("min", 1 / 60)
    return Unit("h", 1 / 3600)


def fmt_seconds(seconds: float) -> str:
    """A duration for people: 850 µs, 12.3 ms, 1.42 s."""
    a = abs(seconds)
    if a == 0:
        return "0 s"
    if a < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if a < 1.0:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s" if a < 100 else f"{seconds:.0f} s"


@dataclass(frozen=True, slots=True)
class Frame:
    """Chart size and the margins around its plot area, in SVG user units."""

    width: float = 960
    height: float = 360
    left: float = 70
    right: float = 20
    top: float = 50
    bottom: float = 60

    @property
    def x0(self) -> float:
        """Left edge of the plot area."""
        return self.left

    @property
    def x1(self) -> float:
        """Right edge of the plot area."""
        return self.width - self.right

    @property
    def y0(self) -> float:
        """Top edge of the plot area."""
        return self.top

    @property
    def y1(self) -> float:
        """Bottom edge of the plot area."""
        return self.height - self.bottom


def svg_open(chart_id: str, frame: Frame, label: str) -> str:
    """The opening <svg> tag of one chart; tests find charts by `data-chart`."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{esc(chart_id)}" '
        f'viewBox="0 0 {num(frame.width)} {num(frame.height)}" role="img" aria-label="{esc(label)}">'
    )


def text(x: float, y: float, content: str, cls: str = "", anchor: str = "start", rotate: float = 0) -> str:
    """A <text> element; content is escaped here."""
    attrs = f'x="{num(x)}" y="{num(y)}"'
    if cls:
        attrs += f' class="{esc(cls)}"'
    if anchor != "start":
        attrs += f' text-anchor="{anchor}"'
    if rotate:
        attrs += f' transform="rotate({num(rotate)} {num(x)} {num(y)})"'
    return f"<text {attrs}>{esc(content)}</text>"


def tooltip(content: str) -> str:
    """A <title> child: the browser shows it on hover, no script needed."""
    return f"<title>{esc(content)}</title>"


def y_axis(frame: Frame, scale: Scale, ticks: Sequence[float], label: str) -> str:
    """Horizontal grid lines, tick labels and the rotated axis title at the left."""
    out = []
    for t in ticks:
        y = scale(t)
        out.append(
            f'<line class="grid" x1="{num(frame.x0)}" x2="{num(frame.x1)}" y1="{num(y)}" y2="{num(y)}"/>'
        )
        out.append(text(frame.x0 - 6, y + 4, tick_label(t), "tick", "end"))
    mid = (frame.y0 + frame.y1) / 2
    out.append(text(16, mid, label, "axis-title", "middle", rotate=-90))
    return "".join(out)


def x_axis(
    frame: Frame,
    scale: Scale,
    ticks: Sequence[float],
    label: str,
    fmt: Callable[[float], str] = tick_label,
) -> str:
    """The baseline, tick marks and labels, and the axis title under the plot."""
    y = frame.y1
    out = [f'<line class="axis" x1="{num(frame.x0)}" x2="{num(frame.x1)}" y1="{num(y)}" y2="{num(y)}"/>']
    for t in ticks:
        x = scale(t)
        out.append(f'<line class="axis" x1="{num(x)}" x2="{num(x)}" y1="{num(y)}" y2="{num(y + 4)}"/>')
        out.append(text(x, y + 17, fmt(t), "tick", "middle"))
    out.append(text((frame.x0 + frame.x1) / 2, frame.height - 12, label, "axis-title", "middle"))
    return "".join(out)


LegendShape = Literal["box", "dot", "line", "dash"]


@dataclass(frozen=True, slots=True)
class LegendItem:
    """One legend entry: a swatch and its label."""

    label: str
    color: str
    shape: LegendShape = "box"


def legend(items: Sequence[LegendItem], x: float, y: float, max_width: float) -> str:
    """Legend entries laid out in rows from (x, y), wrapping at max_width."""
    out = ['<g class="legend">']
    cx, cy = x, y
    for item in items:
        width = 22 + CHAR_W * len(item.label) + 16
        if cx > x and cx + width > x + max_width:
            cx, cy = x, cy + 18
        out.append(_swatch(item, cx, cy))
        out.append(text(cx + 20, cy + 4, item.label, "legend-label"))
        cx += width
    out.append("</g>")
    return "".join(out)


def _swatch(item: LegendItem, x: float, y: float) -> str:
    c = esc(item.color)
    if item.shape == "dot":
        return f'<circle cx="{num(x + 7)}" cy="{num(y)}" r="4" fill="{c}"/>'
    if item.shape in ("line", "dash"):
        dash = ' stroke-dasharray="4 3"' if item.shape == "dash" else ""
        return (
            f'<line x1="{num(x)}" x2="{num(x + 15)}" y1="{num(y)}" y2="{num(y)}" '
            f'stroke="{c}" stroke-width="2.5"{dash}/>'
        )
    return f'<rect x="{num(x)}" y="{num(y - 6)}" width="14" height="12" rx="2" fill="{c}"/>'


def no_data(chart_id: str, frame: Frame, label: str, message: str) -> str:
    """A chart-sized placeholder saying why there is nothing to draw (it has no marks)."""
    return (
        svg_open(chart_id, frame, label) + f'<rect class="empty" x="{num(frame.x0)}" y="{num(frame.y0)}" '
        f'width="{num(frame.x1 - frame.x0)}" height="{num(frame.y1 - frame.y0)}"/>'
        + text((frame.x0 + frame.x1) / 2, (frame.y0 + frame.y1) / 2, message, "empty-text", "middle")
        + "</svg>"
    )
