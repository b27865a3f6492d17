"""The record stage: what the tap makes of one finished exchange, its `RequestTiming` (source "tap")
and its server span's attributes. Times are offsets from the moment the gateway took the request."""

from __future__ import annotations

from opentelemetry.util.types import AttributeValue

from lanewatch.collector.openai_api.error_detail import SPAN_ATTRIBUTE, error_detail
from lanewatch.collector.record.builder import RecordBuilder
from lanewatch.collector.record.content import (
    INPUT_MESSAGES,
    OUTPUT_MESSAGES,
    Message,
    input_messages,
    output_messages,
    prompt_text,
)
from lanewatch.collector.record.timing import RequestTiming

from ..front.connection import Request
from ..upstream.exchange import Exchange
from .content_tap import ContentTap
from .stream_scan import StreamTap

__all__ = ["span_attributes", "tap_record"]


def span_attributes(request: Request, ex: Exchange, record: RequestTiming) -> dict[str, AttributeValue]:
    """The server span's attributes: HTTP and GenAI conventions, the error's reason, and the prompt and
    answer only with record_content."""
    attrs = _http_attributes(request, ex)
    if record.error_message is not None:
        attrs[SPAN_ATTRIBUTE] = record.error_message
    if ex.prompt is not None:
        attrs.update(_content_attributes(ex.prompt, record, ex.tap))
    return attrs


def _http_attributes(request: Request, ex: Exchange) -> dict[str, AttributeValue]:
    """HTTP and GenAI semantic-convention attributes of the server span; no prompt or response text."""
    attrs: dict[str, AttributeValue] = {
        "http.request.method": request.method,
        "url.path": request.path,
        "gen_ai.operation.name": "chat" if ex.api == "chat" else "text_completion",
        "gen_ai.request.model": ex.requested_model or ex.model,
        "lanewatch.lane": ex.decision.routed_lane,
        "lanewatch.served_lane": ex.decision.served_lane,
        "lanewatch.request_class": ex.request_class,
    }
    if ex.status is not None:
        attrs["http.response.status_code"] = ex.status
    if ex.upstream is not None:
        attrs["server.address"] = ex.upstream.host
        attrs["server.port"] = ex.upstream.port
    if ex.actions:
        attrs["lanewatch.degraded"] = ",".join(ex.actions)
    tap = ex.tap
    if tap is not None and tap.completion_tokens is not None:
        attrs["gen_ai.usage.output_tokens"] = tap.completion_tokens
    if tap is not None and tap.prompt_tokens is not None:
        attrs["gen_ai.usage.input_tokens"] = tap.prompt_tokens
    if tap is not None and tap.first_content_at is not None:
        attrs["lanewatch.ttft_s"] = tap.first_content_at - ex.t0
    if ex.error is not None:
        attrs["error.type"] = ex.error.value
    return attrs


def _content_attributes(
    prompt: list[Message], record: RequestTiming, tap: StreamTap | None
) -> dict[str, AttributeValue]:
    """The GenAI opt-in content attributes (record_content): the prompt's messages and the answer."""
    attrs: dict[str, AttributeValue] = {INPUT_MESSAGES: input_messages(prompt)}
    if record.response_text is not None and isinstance(tap, ContentTap):
        attrs[OUTPUT_MESSAGES] = output_messages(record.response_text, tap.content.finish_reason)
    return attrs


def tap_record(ex: Exchange) -> RequestTiming:
    """The tap's record of one proxied request; times are offsets from the gateway receiving it."""
    leg, tap, t0 = ex.leg, ex.tap, ex.t0
    up = ex.upstream
    attrs = {"routed_lane": ex.decision.routed_lane, "degraded": ",".join(ex.actions) or "none"}
    if ex.requested_model is not None:
        attrs["requested_model"] = ex.requested_model[:200]
    if up is not None:
        attrs["upstream"] = up.name
    b = RecordBuilder(
        source="tap",
        target=up.name if up is not None else ex.decision.served_lane,
        lane=ex.decision.served_lane,
        request_class=ex.request_class,
        model=ex.model,
        api=ex.api,
        started_at=ex.started_at,
        request_id=ex.request_id,
        trace_id=ex.trace_id,
        span_id=ex.span_id,
        status=ex.status,
        error=ex.error,
        error_message=_error_message(ex),
        dns_s=leg.dns_s,
        connect_s=leg.connect_s,
        tls_s=leg.tls_s,
        send_s=leg.send_s,
        ttfb_s=None if leg.headers is None else leg.headers - t0,
        e2e_s=None if ex.end is None else ex.end - t0,
        attrs=attrs,
        prompt_text=prompt_text(ex.prompt) if ex.prompt is not None else None,
    )
    if ex.rescue is not None:
        b.late_lane, b.rescue_sent_s, b.late_wait_s = (
            ex.rescue.late_lane,
            ex.rescue.sent_at - t0,
            ex.rescue.late_wait_s,
        )
    if tap is not None:
        b.ttft_s = None if tap.first_content_at is None else tap.first_content_at - t0
        b.itl_s, b.itl_stats = tap.itl()
        b.usage, b.counted_tokens, b.metrics = tap.usage, tap.content_events, tap.metrics
        b.response_text = tap.content.text() if isinstance(tap, ContentTap) else None
    return b.build()


def _error_message(ex: Exchange) -> str | None:
    """A failed request's reason: the gateway's own wording, else the upstream's error frame or body."""
    if ex.error is None:
        return None
    if ex.error_message is not None:
        return ex.error_message
    tap = ex.tap
    return error_detail(tap.error_bytes) if tap is not None and tap.error_bytes else None
