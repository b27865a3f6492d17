"""One completion request along the path: admit it, forward it upstream, tap the answer, record it.

Each stage is its room's (the gateway's face lists them); this module only hands the request
from one to the next. Bytes go downstream as they arrive, unchanged (save the usage event the
gateway asked for itself, see the tap). A client that goes away cancels the handler, which closes the
upstream connection. Failures before the response starts become OpenAI error JSON with
502/504; a stream that breaks later gets an error frame.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from time import perf_counter

from opentelemetry.util.types import AttributeValue

from lanewatch.collector.common.error_detail import SPAN_ATTRIBUTE, error_detail
from lanewatch.collector.common.response_metrics import with_response_metrics
from lanewatch.collector.common.usage import usage_fields
from lanewatch.collector.record.content import (
    INPUT_MESSAGES,
    OUTPUT_MESSAGES,
    Message,
    input_messages,
    output_messages,
    prompt_text,
)
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import Api, RequestTiming

from .admission.admit import Admission, admit
from .content_tap import ContentTap
from .exchange import Exchange
from .front.connection import FrontConn, Request, Response
from .state import Gateway
from .tap import StreamTap
from .tracing import TraceIds
from .upstream.forward import Flight, UpstreamRequest, begin, forward
from .upstream.request_headers import upstream_headers

__all__ = ["handle_completion"]

log = logging.getLogger("lanewatch.gateway")


def handle_completion(
    gw: Gateway, request: Request, conn: FrontConn, api: Api
) -> Response | Awaitable[Response | None]:
    """Proxy one /v1/chat/completions or /v1/completions request.

    The part up to sending upstream runs here, in the callback that read the request; the
    answer the gateway gives itself (400, 429) comes back at once, else the awaitable that
    streams the upstream's answer (to None) or an error response.
    """
    t0, started_at = perf_counter(), time.time()
    admitted = admit(gw, request, api, _peer(conn))
    if isinstance(admitted, Response):
        return admitted
    ex = _exchange(admitted, api, t0, started_at)
    ids = gw.tracing.ids_for(request.headers)
    ex.trace_id, ex.span_id = ids.trace_id_hex, f"{ids.span_id:016x}"
    headers = upstream_headers(request.headers, gw.api_keys.get(ex.decision.served_lane), gw.classifier.token)
    gw.tracing.inject(ids, headers)
    upstream = UpstreamRequest(request.method, request.target, headers, admitted.body, admitted.strip_usage)
    flight = begin(gw, ex, upstream)
    return _proxy(gw, request, conn, ex, flight, ids)


async def _proxy(
    gw: Gateway, request: Request, conn: FrontConn, ex: Exchange, flight: Flight, ids: TraceIds
) -> Response | None:
    rid = gw.in_flight.start(
        ex.decision.served_lane, ex.t0, lambda: None if ex.tap is None else ex.tap.first_content_at
    )
    try:
        return await forward(gw, conn, ex, flight)
    finally:
        ex.end = perf_counter()
        gw.in_flight.end(rid)
        _finish(gw, request, ex, ids)


def _finish(gw: Gateway, request: Request, ex: Exchange, ids: TraceIds) -> None:
    """The request's span and record, once its answer ended (or failed)."""
    try:
        record = _record(ex)
    except RecordError as exc:  # a time no reader could use: never shipped nor written
        log.error("no tap record for a request to lane %s: %s", ex.decision.served_lane, exc)
        return
    if gw.tracing.exporting:  # the attributes cost a few µs a request: only for a span that goes out
        start_ns = int(ex.started_at * 1e9)
        end_ns = start_ns + int(((ex.end or ex.t0) - ex.t0) * 1e9)
        attrs = _span_attributes(request, ex)
        if record.error_message is not None:
            attrs[SPAN_ATTRIBUTE] = record.error_message
        if ex.prompt is not None:
            attrs.update(_content_attributes(ex.prompt, record, ex.tap))
        gw.tracing.record(ids, f"POST {request.path}", start_ns, end_ns, attrs)
    gw.emit(record)


def _exchange(admitted: Admission, api: Api, t0: float, started_at: float) -> Exchange:
    """The admitted request in flight, from the moment the gateway took it."""
    a = admitted
    ex = Exchange(api, t0, started_at, a.request_class, a.model, a.decision, a.actions)
    ex.model_header, ex.requested_model, ex.prompt = a.model_header, a.requested_model, a.prompt
    return ex


def _peer(conn: FrontConn) -> str | None:
    """The client's IP address, for the hint trust check."""
    peer = conn.transport.get_extra_info("peername") if conn.transport is not None else None
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


def _span_attributes(request: Request, ex: Exchange) -> dict[str, AttributeValue]:
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


def _record(ex: Exchange) -> RequestTiming:
    """The tap's record of one proxied request; times are offsets from the gateway receiving it."""
    leg, tap, t0 = ex.leg, ex.tap, ex.t0
    up = ex.upstream
    tokens_from_usage = tap is not None and tap.has_usage
    output = (tap.completion_tokens if tokens_from_usage else tap.content_events) if tap is not None else None
    attrs = {"routed_lane": ex.decision.routed_lane, "degraded": ",".join(ex.actions) or "none"}
    if ex.requested_model is not None:
        attrs["requested_model"] = ex.requested_model[:200]
    if up is not None:
        attrs["upstream"] = up.name
    itl = tap.itl() if tap is not None else ((), None)
    record = RequestTiming(
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
        ttft_s=None if tap is None or tap.first_content_at is None else tap.first_content_at - t0,
        e2e_s=None if ex.end is None else ex.end - t0,
        itl_s=itl[0],
        itl_stats=itl[1],
        output_tokens=output,
        tokens_from_usage=tokens_from_usage,
        attrs=attrs,
        prompt_text=prompt_text(ex.prompt) if ex.prompt is not None else None,
        response_text=tap.content.text() if isinstance(tap, ContentTap) else None,
        **usage_fields(tap.usage if tap is not None else None),  # prompt_tokens, cached_prompt_tokens, ...
    )
    return with_response_metrics(record, tap.metrics) if tap is not None else record


def _error_message(ex: Exchange) -> str | None:
    """A failed request's reason: the gateway's own wording, else the upstream's error frame or body."""
    if ex.error is None:
        return None
    if ex.error_message is not None:
        return ex.error_message
    tap = ex.tap
    return error_detail(tap.error_bytes) if tap is not None and tap.error_bytes else None
