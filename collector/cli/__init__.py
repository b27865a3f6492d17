"""The `lanewatch` command line: one module per command, all on one Typer app."""

from __future__ import annotations

# Each module registers its commands on the app.
from . import (  # noqa: F401
    alerts_cmd,
    collect,
    config_cmd,
    dashboards_cmd,
    degrade,
    demo,
    diagnose,
    gateway,
    probe,
    report,
    sim,
)
from .app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `lanewatch` console script."""
    app()
