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

from lanewatch.collector.record.timing import RequestTiming

from .records import record_of
from .settings import HandlerSettings
from .shipping import RecordShipper

__all__ = ["LanewatchHandler"]

log = logging.getLogger("lanewatch.litellm")


def arrival_of(kwargs: dict[str, Any]) -> float | None:
    """When the proxy took the request (Unix seconds): `proxy_server_request.arrival_time`."""
    params = kwargs.get("litellm_params") or {}
    request = params.get("proxy_server_request") or {} if isinstance(params, dict) else {}
    value = request.get("arrival_time") if isinstance(request, dict) else None
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

    def take(self, kwargs: dict[str, Any]) -> RequestTiming | None:
        """The record of one event's payload, queued for the collector; None when it made none."""
        payload = kwargs.get("standard_logging_object")
        if not isinstance(payload, dict):
            self.skipped["no_payload"] += 1
            return None
        settings = self.settings
        try:
            arrival = arrival_of(kwargs)
            record = record_of(payload, settings.lanes, settings.target, settings.request_class, arrival)
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
