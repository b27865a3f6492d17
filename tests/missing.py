"""What a test does when a real part it needs is missing: skip loudly, or fail under CI=true."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this run is CI's (CI=true), where nothing may be skipped for a missing part."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str) -> NoReturn:
    """Fail under CI=true; elsewhere skip, saying so loudly."""
    if in_ci():
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(f"SKIPPED LOUDLY: {reason}")
