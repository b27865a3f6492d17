"""The probe scheduler's own health: how late probes start, and turns skipped.

A collector that has too many targets for its share of a core starts probes late: the
start delay (actual start minus due time, the wait for a concurrency slot included) is
the first sign, long before probes are skipped because the previous one still runs.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram
from prometheus_client.registry import CollectorRegistry

from lanewatch.exporters import names


class ProbeScheduleMetrics:
    """lanewatch_probe_start_delay_seconds and lanewatch_probes_skipped_total on `registry`."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self._delay = Histogram(
            names.PROBE_START_DELAY_SECONDS,
            "How late each probe started after its due time (waiting for a concurrency slot included).",
            buckets=names.LATENCY_BUCKETS,
            registry=registry,
        )
        self._skipped = Counter(
            names.PROBES_SKIPPED_TOTAL.removesuffix("_total"),
            "Probe turns skipped because the same target and class was still being probed.",
            registry=registry,
        )

    def started(self, delay_s: float) -> None:
        """One probe started `delay_s` after its due time."""
        self._delay.observe(max(delay_s, 0.0))

    def skipped(self) -> None:
        """One turn was skipped."""
        self._skipped.inc()
