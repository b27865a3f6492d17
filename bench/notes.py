"""The prose results.md carries beside the figures: how each part measures and what limits it.

Texts per goal come in pairs, (when met, when not met), so a rerun that flips a verdict never
prints a stale explanation.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NOTES"]

NOTES: dict[str, Any] = {
    "why": {},
    "tap_method": "",
    "probe_method": "",
    "limits": "",
}
