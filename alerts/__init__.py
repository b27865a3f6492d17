"""lanewatch.alerts: SLO spec to Prometheus recording and alerting rules."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import Spec
    from .render import prometheus_rule, rule_file
    from .rules import generate
    from .spec import SpecError, load_spec, parse_spec

__all__ = ["Spec", "SpecError", "generate", "load_spec", "parse_spec", "prometheus_rule", "rule_file"]

# Each name loads its module on first use: reading a spec (`lanewatch diagnose`) needs no rule generator.
_HOMES = {
    "Spec": "model",
    "SpecError": "spec",
    "generate": "rules",
    "load_spec": "spec",
    "parse_spec": "spec",
    "prometheus_rule": "render",
    "rule_file": "render",
}


def __getattr__(name: str) -> Any:
    """The exported name `name`, its module imported on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
