"""The closed label sets a service's request metrics count by: its lanes and its request classes.

Lanes are what every SLO and alert selects by, and a request class is what shedding acts on;
neither may be a client's free choice, or a client could fill the series budget with names
and hide a lane's failures in `__overflow__`. A value outside its set is counted as `other`.
"""

from __future__ import annotations

from collections.abc import Iterable

from lanewatch.collector.collect.settings import ExportConfig
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.record.goodput import Goodput
from lanewatch.exporters.names import OTHER_VALUE

__all__ = ["closed_classes", "closed_lanes"]


def closed_lanes(
    export: ExportConfig,
    gateway: GatewayConfig,
    target_lanes: Iterable[str] = (),
    goodput: Goodput | None = None,
) -> frozenset[str] | None:
    """export.lanes, the gateway's, the targets' and the SLO spec's lanes; None (open) when none is named."""
    lanes = {*export.lanes, *gateway.lanes, *target_lanes, *(goodput.lanes if goodput is not None else ())}
    return frozenset({*lanes, OTHER_VALUE}) if lanes else None


def closed_classes(
    export: ExportConfig, gateway: GatewayConfig, probe_classes: Iterable[str] = ()
) -> frozenset[str] | None:
    """export.request_classes, the probe's and the gateway's classes; None (open) when that is null."""
    if export.request_classes is None:
        return None
    return frozenset({*export.request_classes, *gateway.class_names, *probe_classes, OTHER_VALUE})
