"""lanewatch's errors: one base and four kinds, so a caller tells bad input from a failure from a bug.

    LanewatchError
    ├── ConfigError        settings, flags or an input file that cannot be used; the message
    │                      names the field (and line). A command exits 2: fix it, run again.
    ├── StartupError       the settings are fine but starting failed (a taken port, a missing
    │                      engine, a child that exited). A command exits 1.
    ├── ProtocolViolation  a peer sent what lanewatch cannot read (an HTTP head, a record, a
    │                      span, a webhook). A server answers 4xx, refusing that input alone.
    └── UpstreamError      a peer lanewatch calls failed or went away (a connection, a router).
                           The caller retries, reports it, or answers 502/503.

Each room's own error derives from one kind: `class WebhookError(ProtocolViolation, ValueError)`,
where the second base keeps older `except ValueError` callers working. The names are lanewatch's
own, none of httpx's (its ProtocolError, ConnectError, RequestError are other things). Anything
that is not a LanewatchError is a bug: the CLI lets it through as a traceback and exit 1, never
as bad input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lanewatch.collector.common.input_files import ConfigIssue

__all__ = ["ConfigError", "LanewatchError", "ProtocolViolation", "StartupError", "UpstreamError"]


class LanewatchError(Exception):
    """Every error lanewatch raises on purpose; its message is one the user can act on."""


class ConfigError(LanewatchError):
    """Settings, flags or an input file that cannot be used.

    `ConfigError(source, issues)` lists every problem of one file, each naming its field and
    line; `ConfigError(message)` is one problem whose message already names its field.
    """

    def __init__(self, source: str, issues: Sequence[ConfigIssue] = ()) -> None:
        self.source = source
        self.issues = list(issues)
        text = "\n".join([f"invalid config {source}:", *(f"  {i}" for i in issues)]) if issues else source
        super().__init__(text)


class StartupError(LanewatchError):
    """The settings are fine, but a part could not start (a port, a process, an engine)."""


class ProtocolViolation(LanewatchError):
    """A peer sent something lanewatch cannot read; only that input is refused."""


class UpstreamError(LanewatchError):
    """A peer lanewatch calls failed, could not be reached, or went away mid-answer."""
