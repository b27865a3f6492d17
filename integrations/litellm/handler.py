"""The handler class a LiteLLM proxy config names: LiteLLM's `CustomLogger`, fed each request's
standard logging payload on success and failure (litellm/integrations/custom_logger.py).

Both events are awaited on the proxy's event loop, so each does only pure work and one queue
append (shipping.py sends from a thread). Anything unexpected in a payload is counted and the
request goes on: a bug here must never fail a request LiteLLM served.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import ProxyException

from lanewatch.collector.common.degrade_state import Shifter, WorkOverCap
from lanewatch.collector.common.headers import DEGRADED_HEADER
from lanewatch.collector.record.timing import RequestTiming

from .classing import request_class
from .degrade import DegradeHolder, plan, serve_admin
from .records import API_OF_CALL, record_of
from .settings import HandlerSettings
from .shipping import RecordShipper

__all__ = ["LanewatchHandler"]

log = logging.getLogger("lanewatch.litellm")
CLASS_KEY = "lanewatch_class"  # where the pre-call hook leaves a request's class for its record


def proxy_request(kwargs: dict[str, Any]) -> dict[str, Any]:
    """What the proxy noted of the request (`litellm_params.proxy_server_request`): its
    `arrival_time` (Unix seconds, as the request entered auth) and its headers (auth removed)."""
    params = kwargs.get("litellm_params") or {}
    request = params.get("proxy_server_request") if isinstance(params, dict) else None
    return request if isinstance(request, dict) else {}


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class LanewatchHandler(CustomLogger):  # type: ignore[misc]  # litellm is untyped for mypy here
    """Turns every request the proxy serves into a `RequestTiming` and ships it."""

    def __init__(self, settings: HandlerSettings, shipper: RecordShipper | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.skipped: Counter[str] = Counter()  # reason -> events that made no record
        self.shipper = shipper
        if shipper is None and settings.collector_url:
            self.shipper = RecordShipper(
                settings.collector_url,
                settings.token(),
                queue_records=settings.queue_records,
                batch_records=settings.batch_records,
                interval_s=settings.interval_s,
                timeout_s=settings.timeout_s,
                retry_max_s=settings.retry_max_s,
            )
        self.degrade = DegradeHolder(settings.order())
        self.lane_groups = settings.groups()
        self.shifter = Shifter()
        self.admin = None
        if settings.admin_port is not None:
            host, port = settings.admin_host, settings.admin_port
            try:
                self.admin = serve_admin(self.degrade, host, port, settings.admin_token())
            except OSError as e:  # a second worker of the same proxy: the port is the first's
                log.error("lanewatch: no degrade endpoint on %s:%s (%s): no degrade here", host, port, e)

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str
    ) -> dict[str, Any] | None:
        """Degrade: shift (a new model group), cap (the body's output bound) or shed (a 429)."""
        api = API_OF_CALL.get(call_type) or API_OF_CALL.get(f"a{call_type}")
        if api is None:
            return None
        request = data.get("proxy_server_request")
        headers = request.get("headers") if isinstance(request, dict) else None
        cls = request_class(self.settings, data, headers, api)  # of the body as the client sent it
        if isinstance(request, dict):
            # LiteLLM snapshots the body again after this hook (a shift's model, a cap's bound): the
            # record takes the class decided here, from the same dict its payload carries.
            request[CLASS_KEY] = cls
        lane = self.settings.lanes.get(str(data.get("model")))
        if lane is None or not self.degrade.state.lanes:
            return None
        try:
            p = plan(self.degrade.state, data, lane, cls, self.lane_groups, self.shifter, api)
        except WorkOverCap as e:  # n x prompts alone exceed the lane's cap: refused while it holds
            raise ProxyException(
                message=str(e),
                type="RateLimitError",
                param=None,
                code=429,
                headers={
                    "Retry-After": str(self.settings.shed_retry_after_s),
                    DEGRADED_HEADER: "cap_max_tokens",
                },
            ) from None
        if p.decision.shed:  # LiteLLM logs the refusal as a failure event: its record comes from there
            served = p.decision.served_lane
            raise ProxyException(
                message=f"lane {served!r} is shedding request class {cls!r}; retry later",
                type="RateLimitError",
                param=None,
                code=429,
                # only the shed is named: LiteLLM's other answers carry no lanewatch headers
                headers={"Retry-After": str(self.settings.shed_retry_after_s), DEGRADED_HEADER: "shed"},
            )
        return data

    def take(self, kwargs: dict[str, Any]) -> RequestTiming | None:
        """The record of one event's payload, queued for the collector; None when it made none."""
        payload = kwargs.get("standard_logging_object")
        if not isinstance(payload, dict):
            self.skipped["no_payload"] += 1
            return None
        settings = self.settings
        try:
            request = proxy_request(kwargs)
            arrival = _seconds(request.get("arrival_time"))
            cls = self.record_class(payload, request)
            record = record_of(payload, settings.lanes, settings.target, cls, arrival)
        except Exception:  # a payload no record can be made of (RecordError, odd types)
            self.skipped["unreadable"] += 1
            log.exception("lanewatch: a LiteLLM payload made no record")
            return None
        if record is None:
            self.skipped["call_type"] += 1
            return None
        if self.shipper is not None:
            self.shipper.append(record)
        return record

    def record_class(self, payload: dict[str, Any], request: dict[str, Any]) -> str:
        """A record's class: the one the pre-call hook decided, else by the proxy's copy of the body."""
        if isinstance(decided := request.get(CLASS_KEY), str):
            return decided
        api = API_OF_CALL.get(str(payload.get("call_type"))) or "chat"
        body = request.get("body")
        headers = request.get("headers")
        return request_class(self.settings, body if isinstance(body, dict) else None, headers, api)

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """LiteLLM's success event: one record."""
        self.take(kwargs)

    async def async_log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """LiteLLM's failure event: one record with the error's kind."""
        self.take(kwargs)
