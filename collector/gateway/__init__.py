"""The lane router and passive tap: `lanewatch gateway`.

An OpenAI-compatible front that routes each request to a lane (a pool of upstreams),
applies the degrade state set through its admin API, streams the answer through
unbuffered, and turns every proxied request into a `RequestTiming` (source "tap").

One request's path, in order: accept → parse → admit → forward → tap → record → ship.
Each stage, its module and the function that does it (a test drives a request through a real
gateway and sees each function called, in this order):

1. accept: `front/listener.py` `FrontServer.accept` takes the client's connection.
2. parse: `front/connection.py` `FrontConn.next_request` reads an HTTP/1.1 request off it.
3. admit: `admission/admit.py` `admit` classes and routes it and applies the degrade state.
4. forward: `upstream/forward.py` `forward` sends it upstream and streams the answer back.
5. tap: `tap/stream_scan.py` `StreamTap.feed` reads the answer's timing as its bytes pass.
6. record: `tap/record.py` `tap_record` makes the request's record.
7. ship: `ship/shipper.py` `RecordShipper.append` queues it for the collector (with a
   `collector_url`; without one the gateway's own /metrics count it).

A streamed request whose first token is late is forwarded again to a faster lane, and the first
attempt with a token answers (`upstream/rescue.py`, docs/gateway.md#rescue).

The stages live in rooms along the path, each importing only the rooms before it: front/,
admission/, upstream/, tap/, ship/. `request_path.py` hands a request from one stage to the
next, `server.py` gives each path its handler, `state.py` holds what one gateway process knows
and `stats.py` its counters; processes/ runs it (the entry point, and the supervisor and
workers of `--workers N`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lanewatch.collector.common.headers import DEGRADED_HEADER, LANE_HEADER
    from lanewatch.collector.degrade_state.state import DegradeState, LaneDegrade, parse_degrade
    from lanewatch.collector.record.sink import RecordSink

    from .admission.routing import RouteInput, RouteTable, choose_lane
    from .server import GatewayServer
    from .state import Gateway

# The face's names, loaded on first use: the one config imports gateway/settings.py, and every
# command that loads a config would otherwise import the whole gateway with it.
_FACE: dict[str, str] = {
    "DEGRADED_HEADER": "lanewatch.collector.common.headers",
    "LANE_HEADER": "lanewatch.collector.common.headers",
    "DegradeState": "lanewatch.collector.degrade_state.state",
    "Gateway": ".state",
    "GatewayServer": ".server",
    "LaneDegrade": "lanewatch.collector.degrade_state.state",
    "RecordSink": "lanewatch.collector.record.sink",
    "RouteInput": ".admission.routing",
    "RouteTable": ".admission.routing",
    "choose_lane": ".admission.routing",
    "parse_degrade": "lanewatch.collector.degrade_state.state",
}
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


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module the first time it is asked for."""
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
