"""How every command ends on an error it can name: one line on stderr, a non-zero exit, no traceback."""

from __future__ import annotations

from typing import NoReturn

import typer

__all__ = ["RUNTIME", "USAGE", "fail"]

USAGE = 2  # bad settings, flags or input files: fix them and run again
RUNTIME = 1  # the settings are fine but starting failed (a taken port)


def fail(command: str, message: object, code: int = USAGE) -> NoReturn:
    """Print `lanewatch <command>: <message>` on stderr and exit with `code`."""
    typer.echo(f"lanewatch {command}: {message}", err=True)
    raise typer.Exit(code)
