"""`fake`: a router that can only shift, kept in memory: a new adapter is this one module.

- Shift: held per lane. Cap max_tokens and shed: it cannot (the controller skips them).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from lanewatch.collector.degrade.adapters import Adapter, AdapterSettings, RouterView
from lanewatch.collector.degrade.adapters.base import Capability
from lanewatch.collector.degrade_state.wire import LaneDegrade


class FakeAdapter:
    """Holds what it is told."""

    capabilities: frozenset[Capability] = frozenset({"shift"})

    def __init__(self, name: str, zone: str) -> None:
        self.name = name
        self.zone = zone
        self.held: dict[str, LaneDegrade] = {}

    async def apply(self, lanes: dict[str, LaneDegrade], revision: int) -> None:
        self.held = dict(lanes)

    async def read_back(self) -> RouterView:
        return RouterView(self.held)

    async def finalize(self, revision: int) -> None:
        self.held = {}

    async def shutdown(self) -> None:
        pass


class FakeSettings(AdapterSettings):
    """An in-memory router for tests, in one zone."""

    kind: Literal["fake"] = "fake"
    zone: str

    capabilities: ClassVar[frozenset[Capability]] = FakeAdapter.capabilities

    def build(self) -> Adapter:
        return FakeAdapter(self.label, self.zone)
