"""The handler class a LiteLLM proxy config names: LiteLLM's `CustomLogger`, fed each request's
standard logging payload on success and failure (litellm/integrations/custom_logger.py).

Its hooks and events are awaited on the proxy's event loop, so each does only pure work and one
queue append or table update (shipping.py sends records from a thread; the progress reporter,
progress/report.py, is one task on that loop whose POSTs never block it). The pre-call
hook stamps when the body had fully arrived, which starts the TTFT clock of the record and of a
streamed request's entry in the in-flight table (flights.py); the streaming iterator hook marks
its first content chunk; the stream's close, the success or failure event or the failure hook
ends it. Anything unexpected in a payload is counted and the request goes on: a bug here must
never fail a request LiteLLM served.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from time import perf_counter
from typing import Any

from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import ProxyException

from lanewatch.collector.common.headers import DEGRADED_HEADER
from lanewatch.collector.degrade_state.state import Shifter, WorkOverCap
from lanewatch.collector.progress.report import ProgressReporter
from lanewatch.collector.record.timing import RequestTiming

from .classing import request_class
from .degrade import DegradeHolder, plan, serve_admin
from .flights import Flights, has_content
from .records import API_OF_CALL, record_of
from .settings import HandlerSettings
from .shipping import RecordShipper

__all__ = ["LanewatchHandler"]

log = logging.getLogger("lanewatch.litellm")
# What the pre-call hook leaves in the proxy's note of a request (`proxy_server_request`, one dict
# every later hook and event of the request sees), all JSON values as other loggers may dump it:
CLASS_KEY = "lanewatch_class"  # its class, for its record
BODY_AT_KEY = "lanewatch_body_at"  # when its body had fully arrived (Unix seconds): its record's start
FLIGHT_KEY = "lanewatch_flight"  # a streamed request's id in the in-flight table
FIRST_AT_KEY = "lanewatch_first_at"  # when its first content chunk passed (Unix seconds): its TTFT's end


def proxy_request(kwargs: dict[str, Any]) -> dict[str, Any]:
    """What the proxy noted of the request (`litellm_params.proxy_server_request`): its headers
    (auth removed), its body, and what the pre-call hook left there."""
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
        self.flights = Flights(settings.progress_max_flights, settings.progress_max_age_s)
        self.progress: ProgressReporter | None = None
        if settings.collector_url and settings.progress_interval_s is not None:
            self.progress = ProgressReporter(
                self.flights.table,
                settings.collector_url,
                settings.token(),
                settings.progress_interval_s,
                settings.timeout_s,
                prefix=settings.reporter_name,
            )
        self.degrade = DegradeHolder(settings.order())
        self.lane_groups = settings.groups()
        self.shifter = Shifter()
        self.admin = None
        if settings.admin_port is not None:
            host, port = settings.admin_host, settings.admin_port
            try:
                self.admin = serve_admin(
                    self.degrade,
                    host,
                    port,
                    settings.admin_token(),
                    settings.admin_timeout_s,
                    settings.admin_max_connections,
                )
            except OSError as e:  # a second worker of the same proxy: the port is the first's
                log.error("lanewatch: no degrade endpoint on %s:%s (%s): no degrade here", host, port, e)

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str
    ) -> dict[str, Any] | None:
        """The body has fully arrived: stamp it (the TTFT clock starts), then degrade: shift (a new
        model group), cap (the body's output bound) or shed (a 429); a streamed request that goes on
        enters the in-flight table."""
        t0, body_at = perf_counter(), time.time()
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
            request[BODY_AT_KEY] = body_at
        lane = self.settings.lanes.get(str(data.get("model")))
        out = None
        if lane is not None and self.degrade.state.lanes:
            try:
                p = plan(self.degrade.state, data, lane, cls, self.lane_groups, self.shifter, api)
            except WorkOverCap as exc:  # n x prompts alone exceed the cap: refused while the cap holds
                raise ProxyException(
                    message=str(exc),
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
            out = data
        if isinstance(request, dict) and data.get("stream") is True:
            self._begin(request, str(data.get("model")), t0)  # the lane that serves it, after a shift
        return out

    def _begin(self, request: dict[str, Any], group: str, t0: float) -> None:
        """Enter a streamed request in the in-flight table (a lane with no name in the map: never)."""
        lane = self.settings.lanes.get(group)
        if self.progress is None or lane is None:
            return
        flight = self.flights.begin(lane, t0)
        if flight is not None:
            request[FLIGHT_KEY] = flight.rid
        if not self.progress.running:  # started on the proxy's loop, at its first request
            self.progress.start()

    @staticmethod
    def _note(data: Any) -> dict[str, Any]:
        """The proxy's note of a request, from its request data or an event's kwargs ({} if none)."""
        if not isinstance(data, dict):
            return {}
        request = data.get("proxy_server_request")
        return request if isinstance(request, dict) else proxy_request(data)

    def _end(self, data: Any) -> None:
        flight = self.flights.get(self._note(data).get(FLIGHT_KEY))
        if flight is not None:
            self.flights.end(flight)

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncIterator[Any]:
        """The stream on its way to the client: its first content chunk (for its record and its
        flight), and its end (or the client's)."""
        note = self._note(request_data)
        flight = self.flights.get(note.get(FLIGHT_KEY))
        seen = False
        try:
            async for item in response:
                if not seen and has_content(item):
                    seen = True
                    # LiteLLM's completionStartTime is the first chunk, content or not (a role alone)
                    note[FIRST_AT_KEY] = time.time()
                    if flight is not None:
                        Flights.first_token(flight, perf_counter())
                yield item
        finally:
            if flight is not None:
                self.flights.end(flight)

    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        """The request failed in the proxy (a hook's refusal, the upstream's error): it waits no more."""
        self._end(request_data)

    def take(self, kwargs: dict[str, Any]) -> RequestTiming | None:
        """The record of one event's payload, queued for the collector; None when it made none."""
        payload = kwargs.get("standard_logging_object")
        if not isinstance(payload, dict):
            self.skipped["no_payload"] += 1
            return None
        settings = self.settings
        try:
            request = proxy_request(kwargs)
            body_at = _seconds(request.get(BODY_AT_KEY))
            first_at = _seconds(request.get(FIRST_AT_KEY))
            cls = self.record_class(payload, request)
            record = record_of(payload, settings.lanes, settings.target, cls, body_at, first_at)
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
        """LiteLLM's success event: one record; a stream still in the table ends."""
        self._end(kwargs)
        self.take(kwargs)

    async def async_log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """LiteLLM's failure event: one record with the error's kind; a stream still in the table ends."""
        self._end(kwargs)
        self.take(kwargs)
