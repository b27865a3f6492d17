"""Prometheus duration strings ("5m", "1h30m", "28d") to whole seconds and back."""

from __future__ import annotations

import re

_UNITS: tuple[tuple[str, int], ...] = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
_PATTERN = re.compile(r"^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text: str, *, allow_zero: bool = False) -> int:
    """Seconds in a Prometheus duration such as "5m" or "1h30m"; ValueError when it is not one."""
    match = _PATTERN.match(text.strip()) if isinstance(text, str) else None
    if match is None or not any(match.groups()):
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m, 1h30m, 28d")
    weeks, days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    total = (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0 and not allow_zero:
        raise ValueError(f"{text!r} must be longer than zero")
    return total


def format_duration(seconds: int) -> str:
    """The canonical duration string for whole seconds: 300 -> "5m", 90 -> "1m30s", 2419200 -> "28d"."""
    if seconds <= 0:
        raise ValueError(f"duration must be positive, got {seconds}")
    parts = []
    for unit, size in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
