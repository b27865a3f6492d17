"""Reading a secret (a bearer token, an API key, a signing key) from its file.

One reader for every service, so each refuses the same mistakes with the same words: an
unreadable file, an empty one, whitespace inside the secret (a pasted line break or two
values in one file). The secret itself never appears in an error.
"""

from __future__ import annotations

from pathlib import Path

from lanewatch.collector.common.errors import ConfigError

__all__ = ["SecretError", "read_secret", "read_secret_or_none"]


class SecretError(ConfigError, ValueError):
    """A secret file that cannot be used; the message names the setting and the path, never the secret."""


def read_secret(path: Path, what: str) -> str:
    """The secret in `path`, surrounding whitespace stripped; SecretError names `what` and the path."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SecretError(f"{what} {path}: cannot read: {reason}") from None
    if not value:
        raise SecretError(f"{what} {path}: the file is empty")
    if any(c.isspace() for c in value):
        raise SecretError(f"{what} {path}: whitespace inside the secret")
    return value


def read_secret_or_none(path: Path | None, what: str) -> str | None:
    """`read_secret` for an optional setting: None without a path."""
    return None if path is None else read_secret(path, what)
