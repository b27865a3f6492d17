"""The diagnosis's settings (`diagnose:` in the collector's config): its thresholds, and which checks
run. One model, `Thresholds` (threshold_rules.py), which the generated rules and panels also read."""

from __future__ import annotations

from .thresholds import Thresholds

__all__ = ["DiagnoseConfig"]

DiagnoseConfig = Thresholds
