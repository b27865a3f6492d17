"""How every command ends on an error it can name: one line on stderr, a non-zero exit, no traceback.

Commands catch `LanewatchError` (collector/common/errors.py), never a bare ValueError: a
ConfigError exits 2 (fix the settings, flags or input and run again), any other kind exits 1.
Anything else is a bug and ends as Python's traceback with exit 1, never as "bad input".
"""

from __future__ import annotations

from typing import NoReturn

import typer

from lanewatch.collector.common.errors import ConfigError, LanewatchError

__all__ = ["RUNTIME", "USAGE", "exit_code", "fail"]

USAGE = 2  # bad settings, flags or input files: fix them and run again
RUNTIME = 1  # the settings are fine but starting failed (a taken port)


def exit_code(exc: BaseException) -> int:
    """USAGE for a ConfigError, RUNTIME for any other error."""
    return USAGE if isinstance(exc, ConfigError) else RUNTIME


def fail(command: str, message: object, code: int | None = None) -> NoReturn:
    """Print `lanewatch <command>: <message>` on stderr and exit with `code`.

    Without a code: the exit code of `message` when it is a LanewatchError, else USAGE.
    """
    if code is None:
        code = exit_code(message) if isinstance(message, LanewatchError) else USAGE
    typer.echo(f"lanewatch {command}: {message}", err=True)
    raise typer.Exit(code)
