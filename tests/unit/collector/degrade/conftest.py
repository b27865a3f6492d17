"""A controller on a temp state dir with a settable clock and an adapter that records applies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from lanewatch.collector.degrade.adapters import ALL_ACTIONS, AdapterError, RouterView
from lanewatch.collector.degrade.adapters.base import Capability
from lanewatch.collector.degrade.metrics import DegradeMetrics
from lanewatch.collector.degrade.policy import DEFAULT_POLICY, Policy
from lanewatch.collector.degrade.service import DegradeService
from lanewatch.collector.degrade.state import LaneSpec
from lanewatch.collector.degrade.store import Store

T0 = 1_800_000_000.0
POLICY = DEFAULT_POLICY.with_hysteresis(min_hold_s=10, recovery_stable_s=5, escalation_cooldown_s=3)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class RecordingAdapter:
    """Stands in for a router at the Adapter interface: keeps every apply, fails on demand."""

    def __init__(self, name: str = "recording", capabilities: frozenset[Capability] = ALL_ACTIONS) -> None:
        self.name = name
        self.capabilities = capabilities
        self.applied: list[tuple[int, dict[str, LaneSpec]]] = []
        self.fail = False

    async def apply(self, lanes: dict[str, LaneSpec], revision: int) -> None:
        if self.fail:
            raise AdapterError("router unreachable", retryable=True)
        self.applied.append((revision, dict(lanes)))

    async def read_back(self) -> RouterView | None:
        return RouterView(self.applied[-1][1]) if self.applied else RouterView()

    async def finalize(self, revision: int) -> None:
        await self.apply({}, revision)

    async def shutdown(self) -> None:
        pass


class Controller:
    """A service plus what tests look at: its store, clock, adapter and metrics registry."""

    def __init__(
        self, state_dir: Path, policy: Policy = POLICY, adapter: RecordingAdapter | None = None
    ) -> None:
        self.clock = Clock()
        self.adapter = adapter or RecordingAdapter()
        self.store = Store(state_dir)
        self.registry = CollectorRegistry()
        self.metrics = DegradeMetrics(self.registry, [self.adapter.name])
        self.service = DegradeService(policy, self.store, [self.adapter], self.metrics, clock=self.clock)

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    c = Controller(tmp_path / "state")
    yield c
    c.store.close()
