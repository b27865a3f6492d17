"""One proxied request while it is in flight: made by the request path, filled as it is forwarded,
read by the tap for its record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lanewatch.collector.common.headers import DEGRADED_HEADER, LANE_HEADER, MODEL_HEADER, RESCUED_HEADER
from lanewatch.collector.degrade_state.state import Decision
from lanewatch.collector.http1.phases import LegTimes
from lanewatch.collector.record.content import Message
from lanewatch.collector.record.timing import Api, ErrorKind

from .pool import Upstream

if TYPE_CHECKING:  # the tap is made for the request by the next stage's class (Gateway.tap_class)
    from ..tap.stream_scan import StreamTap

__all__ = ["Exchange", "RescueTrace"]


@dataclass(slots=True)
class RescueTrace:
    """A rescue sent for the request: the lane that was late, and when the second attempt left."""

    late_lane: str
    sent_at: float  # perf_counter()
    late_wait_s: float | None = None  # a won rescue's late attempt: to its first token, or its cancel


@dataclass(slots=True)
class Exchange:
    """The request's routing, its upstream leg, its tap and its outcome."""

    api: Api
    t0: float  # perf_counter() when the gateway took the request
    started_at: float  # wall clock of the same moment
    request_class: str
    model: str  # the model the serving lane was asked for (the client's, unless rewritten)
    decision: Decision
    actions: tuple[str, ...]  # degrade actions applied, in header order
    upstream: Upstream | None = None
    leg: LegTimes = field(default_factory=LegTimes)
    tap: StreamTap | None = None
    status: int | None = None
    error: ErrorKind | None = None
    error_message: str | None = None  # the reason, cleaned, when the gateway worded it (a failed upstream)
    request_id: str | None = None
    trace_id: str | None = None
    span_id: str | None = None  # the gateway's span, sent upstream as the traceparent's parent-id
    end: float | None = None
    prompt: list[Message] | None = None  # the request's messages, kept only with record_content
    model_header: str | None = None  # x-lanewatch-model's value; None when the body names no model
    requested_model: str | None = None  # set only when the gateway rewrote the model
    rescue: RescueTrace | None = None  # a second attempt was sent to a faster lane (upstream/rescue.py)

    def lane_headers(self) -> dict[str, str]:
        """`x-lanewatch-lane`, `x-lanewatch-model` and, when a degrade applied, `x-lanewatch-degraded`;
        `x-lanewatch-rescued-from` on an answer a faster lane gave in place of a late one."""
        headers = {LANE_HEADER: self.decision.served_lane}
        if self.model_header is not None:
            headers[MODEL_HEADER] = self.model_header
        if self.actions:
            headers[DEGRADED_HEADER] = ",".join(self.actions)
        if self.rescue is not None and self.rescue.late_lane != self.decision.served_lane:
            headers[RESCUED_HEADER] = self.rescue.late_lane
        return headers
