"""Shared fixtures: a clean environment per test, and real binaries or a loud skip."""

from __future__ import annotations

import os
import shutil

import pytest

from lanewatch.collector.config import ENV_PREFIX


@pytest.fixture(autouse=True)
def _clean_lanewatch_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees LANEWATCH__ overrides from the shell that ran it."""
    for key in list(os.environ):
        if key.startswith(ENV_PREFIX):
            monkeypatch.delenv(key)


def require_binary(name: str) -> str:
    """Path of a real binary; skip loudly without it, but fail under CI=true."""
    path = shutil.which(name)
    if path:
        return path
    reason = f"{name} not found: install Debian's prometheus / prometheus-alertmanager (make tools)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(f"SKIPPED LOUDLY: {reason}")
