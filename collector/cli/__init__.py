"""The `lanewatch` command line: one module per command, all on one Typer app."""

from __future__ import annotations

from . import collect, config_cmd  # noqa: F401  (registers its commands)
from .app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `lanewatch` console script."""
    app()
