"""The `lanewatch` command line: one module per command, all on one Typer app."""

from __future__ import annotations

from . import (
    collect,  # noqa: F401  (each registers its commands)
    config_cmd,  # noqa: F401
    degrade,  # noqa: F401
    probe,  # noqa: F401
    report,  # noqa: F401
    sim,  # noqa: F401
)
from .app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `lanewatch` console script."""
    app()
