"""The demo's watcher: polls Alertmanager, the gateway and Prometheus each tick and turns what
changed into events (the pure diffs are in events.py)."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import httpx

from .events import AlertKey, Event, alert_changes, degrade_changes
from .stack import Stack

__all__ = ["Watch"]

T = TypeVar("T")


class Watch:
    """The demo's view of the stack, refreshed each tick: events, alerts, burn, degrade."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.events: list[Event] = []
        self.firing: set[AlertKey] = set()
        self.degraded: dict[str, dict[str, Any]] = {}
        self.alerts: list[str] = []
        self.burn: dict[str, float] = {}
        self.t0 = time.monotonic()

    def add(self, event: Event) -> None:
        """Record an event the run itself caused (a fault injected or cleared)."""
        self.events.append(event)

    def happened(self) -> list[tuple[float, str]]:
        """(seconds since the start, kind) of every event so far, for the timeline."""
        started = time.time() - (time.monotonic() - self.t0)
        return [(e.t - started, e.kind) for e in self.events]

    async def poll(self) -> list[Event]:
        """Poll Alertmanager and the gateway for changes, Prometheus for the view; returns new events."""
        new: list[Event] = []
        if self.stack.has_alertmanager:
            alerts = await _quiet(self.stack.alerts())
            if alerts is not None:
                self.firing, found = alert_changes(self.firing, alerts, time.time())
                new += found
        state = await _quiet(self.stack.degrade_state())
        if state is not None:
            self.degraded, found = degrade_changes(self.degraded, state, time.time())
            new += found
        if self.stack.has_prometheus:
            await self._prometheus()
        self.events += new
        return new

    async def _prometheus(self) -> None:
        burn = await _quiet(self.stack.query('slo:current_burn_rate:ratio{slo="ttft"}'))
        if burn is not None:
            self.burn = {s["metric"].get("lane", "?"): float(s["value"][1]) for s in burn}
        firing = await _quiet(self.stack.query('ALERTS{alertstate="firing",alertname=~"Lanewatch.*"}'))
        if firing is not None:
            labels = [s["metric"] for s in firing]
            self.alerts = sorted(
                f"{m['alertname']} {m.get('lane', '')} {m.get('severity', '')}" for m in labels
            )


async def _quiet(call: Awaitable[T]) -> T | None:
    """The call's result, or None when the part does not answer (yet)."""
    try:
        return await call
    except (httpx.HTTPError, ValueError, KeyError):
        return None
