"""`dry-run`: changes nothing anywhere; logs each new desired state it would apply.

- Shift, cap max_tokens and shed: all accepted and logged as JSON, once per change.
- Read-back: what it was last told, and at which revision (it holds that state and nothing else).
- Cannot: affect any traffic. For trying a policy against real alerts first.
"""

from __future__ import annotations

import json
import logging
from typing import ClassVar, Literal

from lanewatch.collector.degrade_state.wire import LaneDegrade

from ..state import lanes_to_json
from .base import ALL_ACTIONS, Adapter, AdapterSettings, Capability, RouterView

__all__ = ["DryRunAdapter", "DryRunSettings"]

log = logging.getLogger("lanewatch.degrade.adapters")


class DryRunAdapter:
    """Logs each new desired state; changes nothing anywhere."""

    capabilities: frozenset[Capability] = ALL_ACTIONS

    def __init__(self, name: str = "dry-run") -> None:
        self.name = name
        self._last: str | None = None
        self._held: dict[str, LaneDegrade] = {}
        self._revision: int | None = None

    async def apply(self, lanes: dict[str, LaneDegrade], revision: int) -> None:
        """Log the state when it differs from the last one logged."""
        text = json.dumps(lanes_to_json(lanes), sort_keys=True)
        if text != self._last:
            log.info("dry-run: would apply revision %d: %s", revision, text)
            self._last = text
        self._held = {lane: spec for lane, spec in lanes.items() if spec.active()}
        self._revision = revision

    async def read_back(self) -> RouterView:
        """The state last applied, at its revision."""
        return RouterView(lanes=dict(self._held), revision=self._revision)

    async def finalize(self, revision: int) -> None:
        """Log the empty state."""
        await self.apply({}, revision)

    async def shutdown(self) -> None:
        """Nothing to release."""


class DryRunSettings(AdapterSettings):
    """Logs what would be applied; for trying a policy before it acts."""

    kind: Literal["dry-run"] = "dry-run"

    capabilities: ClassVar[frozenset[Capability]] = DryRunAdapter.capabilities

    def build(self) -> Adapter:
        """The adapter."""
        return DryRunAdapter(self.label)
