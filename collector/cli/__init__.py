"""The `lanewatch` command line: one module per command, all on one Typer app."""

from __future__ import annotations

from . import config_cmd, degrade, probe, report, sim  # noqa: F401  (each registers its commands)
from .app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `lanewatch` console script."""
    app()
