"""The gateway's own metrics as a custom prometheus_client Collector over its live counters.

The gateway's stats object is read through the `GatewayView` protocol, so exporters
imports nothing of the gateway (exporters may import collector.record and collector.common only).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import names

__all__ = ["GatewayCollector", "GatewayView", "ShipperCollector", "ShippingView", "UpstreamState"]


class UpstreamState(Protocol):
    """One upstream's live state."""

    @property
    def lane(self) -> str: ...
    @property
    def upstream(self) -> str: ...
    @property
    def inflight(self) -> int: ...
    @property
    def healthy(self) -> bool: ...


class GatewayView(Protocol):
    """What the collector reads of a gateway (collector/gateway/stats.py GatewayStats)."""

    @property
    def requests(self) -> Mapping[tuple[str, str, str], int]: ...
    @property
    def shed(self) -> Mapping[tuple[str, str], int]: ...
    @property
    def degrade_applied(self) -> Mapping[tuple[str, str], int]: ...
    @property
    def upstream_errors(self) -> Mapping[tuple[str, str, str], int]: ...
    @property
    def rescues(self) -> Mapping[tuple[str, str, str], int]: ...
    @property
    def refused(self) -> Mapping[str, int]: ...
    @property
    def degrade_version(self) -> int: ...
    @property
    def degrade_refused(self) -> Mapping[str, int]: ...
    @property
    def lane_models(self) -> Sequence[tuple[str, str, str]]: ...
    @property
    def model_discovery_failures(self) -> Mapping[str, int]: ...
    @property
    def model_collisions(self) -> Mapping[str, int]: ...
    @property
    def upstreams(self) -> Sequence[UpstreamState]: ...


# Every reason an admin PUT is refused for, exported from the start so a rate() sees the first one.
DEGRADE_REFUSED_REASONS = ("invalid", "stale_revision", "models_unknown")


class GatewayCollector(Collector):
    """Requests by lane / served lane / degrade, in-flight and health per upstream, shed, errors."""

    def __init__(self, view: GatewayView) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        """One scrape's worth of gateway metrics."""
        v = self._view
        yield _counter(
            names.GATEWAY_REQUESTS_TOTAL,
            "Requests admitted by the gateway, by routed lane, serving lane and degrade actions applied.",
            (names.LANE, names.SERVED_LANE, names.DEGRADED),
            v.requests,
        )
        yield _counter(
            names.GATEWAY_SHED_TOTAL,
            "Requests refused with 429 because their lane sheds their class, by the lane routed to.",
            (names.LANE, names.REQUEST_CLASS),
            v.shed,
        )
        yield _counter(
            names.GATEWAY_DEGRADE_APPLIED_TOTAL,
            "Degrade actions applied to requests, by routed lane and action.",
            (names.LANE, names.ACTION),
            v.degrade_applied,
        )
        yield _counter(
            names.GATEWAY_UPSTREAM_ERRORS_TOTAL,
            "Upstream requests that failed before a response (connect, TLS, timeout).",
            (names.LANE, names.UPSTREAM, names.ERROR_KIND),
            v.upstream_errors,
        )
        yield _counter(
            names.GATEWAY_RESCUES_TOTAL,
            "Streamed requests whose first token was late, by what the rescue did: a second attempt on "
            "a faster lane that won, lost or failed, or why none was sent (the bucket was empty, the "
            "faster lane was degraded, protecting or over its own TTFT SLO).",
            (names.LANE, names.TO_LANE, names.OUTCOME),
            v.rescues,
        )
        refused = CounterMetricFamily(
            names.GATEWAY_REFUSED_REQUESTS_TOTAL,
            "Requests answered with an error before routing (unreadable, too big, too slow to arrive, "
            "over the connection cap), by the status answered.",
            labels=(names.CODE,),
        )
        for code, count in sorted(dict(v.refused).items()):
            refused.add_metric((code,), count)
        yield refused
        ups = list(v.upstreams)
        inflight = GaugeMetricFamily(
            names.GATEWAY_INFLIGHT, "Requests in flight per upstream.", labels=(names.LANE, names.UPSTREAM)
        )
        healthy = GaugeMetricFamily(
            names.GATEWAY_UPSTREAM_HEALTHY,
            "1 while the upstream is in rotation, 0 while ejected.",
            labels=(names.LANE, names.UPSTREAM),
        )
        for u in ups:
            inflight.add_metric((u.lane, u.upstream), u.inflight)
            healthy.add_metric((u.lane, u.upstream), 1.0 if u.healthy else 0.0)
        yield inflight
        yield healthy
        yield GaugeMetricFamily(
            names.GATEWAY_DEGRADE_STATE_VERSION,
            "Version of the degrade state set through /admin/degrade (0 = never set).",
            value=v.degrade_version,
        )
        yield from _model_families(v)


def _model_families(v: GatewayView) -> Iterator[Metric]:
    refused = CounterMetricFamily(
        names.GATEWAY_DEGRADE_REFUSED_TOTAL,
        "PUT /admin/degrade answers that changed nothing: invalid (400), stale_revision (409, older than "
        "the state held), models_unknown (409, a shift to a lane whose models are not known).",
        labels=(names.REASON,),
    )
    counts = dict(v.degrade_refused)
    for reason in sorted({*DEGRADE_REFUSED_REASONS, *counts}):
        refused.add_metric((reason,), counts.get(reason, 0))
    yield refused
    info = GaugeMetricFamily(
        names.GATEWAY_LANE_MODEL_INFO,
        "1 for each model a lane serves: declared in its config, or learned from its upstreams' /v1/models.",
        labels=(names.LANE, names.MODEL, names.SOURCE),
    )
    for lane, model, source in tuple(v.lane_models):
        info.add_metric((lane, model, source), 1.0)
    yield info
    failures = CounterMetricFamily(
        names.GATEWAY_MODEL_DISCOVERY_FAILURES_TOTAL,
        "Upstream /v1/models answers a lane without declared models could not use "
        "(the lane keeps the models it had).",
        labels=(names.LANE,),
    )
    for lane, count in sorted(dict(v.model_discovery_failures).items()):
        failures.add_metric((lane,), count)
    yield failures
    collisions = CounterMetricFamily(
        names.GATEWAY_MODEL_COLLISIONS_TOTAL,
        "Times a lane began to list a model another lane owns (declared there, or listed there first); "
        "requests naming the model stay with its owner.",
        labels=(names.LANE,),
    )
    for lane, count in sorted(dict(v.model_collisions).items()):
        collisions.add_metric((lane,), count)
    yield collisions


class ShippingView(Protocol):
    """What the collector reads of the record shipper (ShipStats, collector/record/shipping.py)."""

    @property
    def shipped(self) -> int: ...
    @property
    def send_failures(self) -> int: ...
    @property
    def dropped(self) -> Mapping[str, int]: ...
    @property
    def queued(self) -> int: ...


# Every drop reason, exported from the start so a rate() sees the first drop.
DROP_REASONS = ("queue_full", "rejected", "refused", "unencodable", "shutdown")


class ShipperCollector(Collector):
    """Records shipped to the collector, failed sends, records dropped by reason, records queued."""

    def __init__(self, view: ShippingView) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        """One scrape's worth of shipping metrics."""
        v = self._view
        yield CounterMetricFamily(
            names.GATEWAY_SHIPPED_RECORDS_TOTAL,
            "Tap records the collector accepted (it exports their request metrics).",
            value=v.shipped,
        )
        yield CounterMetricFamily(
            names.GATEWAY_SHIP_SEND_FAILURES_TOTAL,
            "Record batches the collector did not take (no answer, 5xx, 429); sent again after a backoff.",
            value=v.send_failures,
        )
        dropped = CounterMetricFamily(
            names.GATEWAY_SHIP_DROPPED_RECORDS_TOTAL,
            "Tap records never shipped: queue full (oldest first), rejected (the batch), "
            "refused (the record), unencodable, left at shutdown.",
            labels=(names.REASON,),
        )
        counts = dict(v.dropped)  # a copy: rendered on a worker thread while the loop counts on
        for reason in sorted({*DROP_REASONS, *counts}):
            dropped.add_metric((reason,), counts.get(reason, 0))
        yield dropped
        yield GaugeMetricFamily(
            names.GATEWAY_SHIP_QUEUED_RECORDS, "Tap records waiting to be shipped.", value=v.queued
        )


def _counter(
    name: str,
    doc: str,
    labels: tuple[str, ...],
    values: Mapping[tuple[str, str, str], int] | Mapping[tuple[str, str], int],
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    # One dict copy first: /metrics renders on a worker thread while the loop counts on.
    for key, count in sorted(dict(values).items()):
        family.add_metric(key, count)
    return family
