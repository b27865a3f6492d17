"""The gateway's own counters; exporters/gateway.py renders them for /metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from .upstream.pool import LanePool

__all__ = ["GatewayStats", "UpstreamView"]


@dataclass(frozen=True, slots=True)
class UpstreamView:
    """One upstream as /metrics shows it."""

    lane: str
    upstream: str
    inflight: int
    healthy: bool


@dataclass(slots=True)
class GatewayStats:
    """Counters since start, keyed by label values; the pools are read live."""

    pools: Sequence[LanePool] = ()
    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # lane, served_lane, degraded
    shed: Counter[tuple[str, str]] = field(default_factory=Counter)  # lane, request_class
    degrade_applied: Counter[tuple[str, str]] = field(default_factory=Counter)  # lane, action
    upstream_errors: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # lane, upstream, kind
    rescues: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # lane, target, outcome
    refused: Counter[str] = field(default_factory=Counter)  # status answered before routing
    degrade_version: int = 0
    degrade_refused: Counter[str] = field(default_factory=Counter)  # reason an admin PUT was refused
    lane_models: tuple[tuple[str, str, str], ...] = ()  # (lane, model, declared | learned)
    model_discovery_failures: Counter[str] = field(default_factory=Counter)  # lane
    model_collisions: Counter[str] = field(default_factory=Counter)  # lane listing a model another owns

    def count_refused(self, status: int) -> None:
        """Count a request refused before routing (unreadable, too big, too slow, over the cap)."""
        self.refused[str(status)] += 1

    @property
    def upstreams(self) -> list[UpstreamView]:
        """Every upstream's in-flight count and health."""
        return [
            UpstreamView(pool.lane, u.name, u.outstanding, u.healthy)
            for pool in self.pools
            for u in pool.upstreams
        ]
