"""Reading a secret (a bearer token) from its file: stripped, never empty, never logged."""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_secret"]


def read_secret(path: Path | None) -> str | None:
    """The secret in `path` (None without a path); OSError when unreadable, ValueError when empty."""
    if path is None:
        return None
    value = path.read_text(encoding="utf-8").strip()
    if not value:
        raise ValueError(f"{path}: the secret file is empty")
    return value
