"""Numbers as people read them in alert text: 99.9%, 500ms, about 5d."""

from __future__ import annotations

from .duration import format_duration


def percent(ratio: float) -> str:
    """0.999 -> "99.9%"."""
    return f"{ratio * 100:.10g}%"


def seconds(value: float) -> str:
    """0.5 -> "500ms", 2.0 -> "2s"."""
    return f"{value * 1000:.10g}ms" if value < 1 else f"{value:.10g}s"


def factor(value: float) -> str:
    """13.44 -> "13.44x", 0.9333 -> "0.93x"."""
    return f"{round(value, 2):g}x"


def about(total_s: float) -> str:
    """A rough duration in its largest sensible unit: 180000 -> "2d", 643 -> "11m"."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if total_s >= 2 * size:
            return f"{round(total_s / size)}{unit}"
    return format_duration(max(1, round(total_s)))
