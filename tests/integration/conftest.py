"""Fixtures the integration tests share: a simulator per test module, over HTTP and HTTPS."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import SimHandle, start_simulator


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    """`lanewatch sim --profile fast` over HTTP, for the module (a module may define its own)."""
    with start_simulator(tmp_path_factory.mktemp("sim"), profile="fast") as handle:
        yield handle


@pytest.fixture(scope="module")
def tls_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    """`lanewatch sim --profile fast --tls`, for the module."""
    with start_simulator(tmp_path_factory.mktemp("tls-sim"), profile="fast", tls=True) as handle:
        yield handle
