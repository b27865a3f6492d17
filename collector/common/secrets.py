"""Secrets: tokens read from files (never from config values or flags), and bearer headers checked
against them in constant time."""

from __future__ import annotations

import hmac
from pathlib import Path

from lanewatch.collector.common.errors import ConfigError

__all__ = ["SecretError", "bearer_ok", "holds_token", "read_secret", "read_secret_or_none"]


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


def bearer_ok(header: str | None, token: str) -> bool:
    """Whether an Authorization header is `Bearer <token>`; constant time in the token's content."""
    scheme, _, value = (header or "").partition(" ")
    # compare first, so a wrong scheme and a wrong token take the same path
    same = hmac.compare_digest(value.strip().encode("utf-8", "replace"), token.encode())
    return same and scheme.lower() == "bearer"


def holds_token(header: str, token: str) -> bool:
    """Whether an Authorization header's credential is `token`, under any scheme or none; constant time."""
    whole = header.strip()
    _scheme, _, value = whole.partition(" ")
    secret = token.encode()
    # both compared always, so a bare token (no scheme) takes the same path as a `Bearer` one
    bare = hmac.compare_digest(whole.encode("utf-8", "replace"), secret)
    after_scheme = hmac.compare_digest(value.strip().encode("utf-8", "replace"), secret)
    return bare or after_scheme
