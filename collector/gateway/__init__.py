"""The lane router and passive tap: `lanewatch gateway`.

An OpenAI-compatible front that routes each request to a lane (a pool of upstreams),
applies the degrade state set through its admin API, streams the answer through
unbuffered, and turns every proxied request into a `RequestTiming` (source "tap").
"""

from __future__ import annotations

from lanewatch.collector.common.degrade_state import DegradeState, LaneDegrade, parse_degrade

from .admission.routing import RouteInput, RouteTable, choose_lane
from .server import GatewayServer
from .state import Gateway, RecordSink
from .tap.exchange import DEGRADED_HEADER, LANE_HEADER

__all__ = [
    "DEGRADED_HEADER",
    "LANE_HEADER",
    "DegradeState",
    "Gateway",
    "GatewayServer",
    "LaneDegrade",
    "RecordSink",
    "RouteInput",
    "RouteTable",
    "choose_lane",
    "parse_degrade",
]
