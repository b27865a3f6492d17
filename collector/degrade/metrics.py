"""The controller's Prometheus metrics, on an injected registry (no module-level globals).

State gauges are computed from the current state at scrape time by a custom collector, so
they can never drift from what the controller holds; counters count events as they happen.
Label values are lanes, actions, adapter names and fixed outcomes: never secrets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lanewatch.exporters import names

from .applier import FAILURE_REASONS
from .policy import Policy
from .state import ACTIONS, ControllerState, desired_state

__all__ = ["DegradeMetrics"]


class _StateCollector(Collector):
    def __init__(
        self, policy: Policy, view: Callable[[], tuple[ControllerState, int, dict[str, bool]]]
    ) -> None:
        self._policy = policy
        self._view = view

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state, revision, synced = self._view()
        lanes = desired_state(state)
        known = sorted({*self._policy.lane_order, *lanes})
        active = GaugeMetricFamily(
            names.DEGRADE_ACTIVE,
            "1 while a degrade action is on for a lane.",
            labels=[names.LANE, names.ACTION],
        )
        shift = GaugeMetricFamily(
            names.DEGRADE_SHIFT_RATIO,
            "Share of a lane's requests shifted to a faster lane (0..1).",
            labels=[names.LANE, names.TO_LANE],
        )
        cap = GaugeMetricFamily(
            names.DEGRADE_MAX_TOKENS_CAP, "max_tokens cap on a lane (0 = no cap).", labels=[names.LANE]
        )
        for lane in known:
            spec = lanes.get(lane)
            on = spec.active() if spec else ()
            for action in ACTIONS:
                active.add_metric([lane, action], 1.0 if action in on else 0.0)
            cap.add_metric([lane], float(spec.cap_max_tokens or 0) if spec else 0.0)
            to = spec.shift_to if spec and spec.shift_to else self._faster(lane)
            if to is not None:
                shift.add_metric([lane, to], (spec.shift_percent / 100.0) if spec and "shift" in on else 0.0)
        yield from (active, shift, cap)
        sync = GaugeMetricFamily(
            names.DEGRADE_ADAPTER_SYNCED,
            "1 when the adapter's last apply of the current state succeeded.",
            labels=[names.ADAPTER],
        )
        for adapter, ok in sorted(synced.items()):
            sync.add_metric([adapter], 1.0 if ok else 0.0)
        yield sync
        yield GaugeMetricFamily(
            names.DEGRADE_STATE_REVISION, "Revision of the stored controller state.", value=float(revision)
        )

    def _faster(self, lane: str) -> str | None:
        return self._policy.faster_lane(lane) if lane in self._policy.lane_order else None


class _LeaderCollector(Collector):
    def __init__(self, leading: Callable[[], bool]) -> None:
        self._leading = leading

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            names.DEGRADE_LEADER,
            "1 while this controller leads (holds the lease of a pair, or runs alone).",
            value=1.0 if self._leading() else 0.0,
        )


class DegradeMetrics:
    """Counters for events plus a collector over the live state, all on `registry`."""

    def __init__(self, registry: CollectorRegistry, adapters: Sequence[str]) -> None:
        self.registry = registry
        self.transitions = Counter(
            names.DEGRADE_TRANSITIONS_TOTAL,
            "Degrade action changes, by lane, action and direction (apply, escalate, restore).",
            [names.LANE, names.ACTION, names.DIRECTION],
            registry=registry,
        )
        self.adapter_failures = Counter(
            names.DEGRADE_ADAPTER_FAILURES_TOTAL,
            "Adapter applies that failed after their retries, by reason (timeout, refused, error, ...).",
            [names.ADAPTER, names.REASON],
            registry=registry,
        )
        self.adapter_skipped = Counter(
            names.DEGRADE_ADAPTER_SKIPPED_TOTAL,
            "Degrade actions skipped on a lane because the adapter's router cannot take them.",
            [names.ADAPTER, names.ACTION],
            registry=registry,
        )
        self.notifications = Counter(
            names.DEGRADE_NOTIFICATIONS_TOTAL,
            "Webhook posts by outcome (applied, unchanged, queued, unauthorized, too_large, invalid, error).",
            [names.OUTCOME],
            registry=registry,
        )
        self.alerts = Counter(
            names.DEGRADE_ALERTS_TOTAL,
            "Alerts in valid notifications by outcome (fired, joined, resolved, duplicate, stale, ...).",
            [names.OUTCOME],
            registry=registry,
        )
        for adapter in adapters:
            for reason in FAILURE_REASONS:
                self.adapter_failures.labels(adapter, reason)

    def lead(self, leading: Callable[[], bool]) -> None:
        """Export `lanewatch_degrade_leader` from `leading()` (one of a pair; a lone one leads always)."""
        self.registry.register(_LeaderCollector(leading))

    def watch(self, policy: Policy, view: Callable[[], tuple[ControllerState, int, dict[str, bool]]]) -> None:
        """Export the state gauges from `view()` = (state, revision, adapter synced flags)."""
        self.registry.register(_StateCollector(policy, view))
