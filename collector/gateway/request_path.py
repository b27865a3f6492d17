"""The data path: route one OpenAI request, apply degrade, stream the upstream answer through, tap it.

Bytes go downstream as they arrive, unchanged (save the usage event the gateway asked
for itself, see tap.py). A client that goes away cancels the handler, which closes the
upstream connection. Failures before the response starts become OpenAI error JSON with
502/504; a stream that breaks later gets an error frame.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Mapping
from time import perf_counter
from typing import Any

from multidict import CIMultiDict
from opentelemetry.util.types import AttributeValue

from lanewatch.collector.common.bearer import holds_token
from lanewatch.collector.common.degrade_state import Decision, cap_max_tokens, decide
from lanewatch.collector.common.error_detail import SPAN_ATTRIBUTE, error_detail
from lanewatch.collector.common.headers import AUTHORIZATION, TRACEPARENT, TRACESTATE
from lanewatch.collector.common.request_reading import ReadingError
from lanewatch.collector.common.response_metrics import with_response_metrics
from lanewatch.collector.common.usage import usage_fields
from lanewatch.collector.record.content import (
    INPUT_MESSAGES,
    OUTPUT_MESSAGES,
    Message,
    input_messages,
    output_messages,
    prompt_text,
    request_messages,
)
from lanewatch.collector.record.rules import MAX_ATTR_CHARS, MAX_LABEL_CHARS, RecordError, clean_text
from lanewatch.collector.record.timing import Api, RequestTiming

from .classify import ClassHintError, classify_request
from .content_tap import ContentTap
from .exchange import DEGRADED_HEADER, LANE_HEADER, Exchange
from .forward import Flight, UpstreamRequest, begin, forward
from .front.connection import FrontConn, Request, Response
from .front.errors import error_response
from .lane_models import header_value, serve_as
from .routing import RouteError, choose_lane
from .state import Gateway
from .tap import StreamTap
from .tracing import TraceIds

__all__ = ["handle_completion"]

log = logging.getLogger("lanewatch.gateway")

_AUTH_HEADER = AUTHORIZATION  # a header's name, compared as a name (the credential goes through bearer_ok)

# Hop-by-hop and gateway-owned headers: never passed upstream as the client sent them.
_HOP = frozenset(
    {
        *("connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer"),
        *("transfer-encoding", "upgrade", "host", "content-length", "accept-encoding"),
        *(TRACEPARENT, TRACESTATE, "expect", LANE_HEADER),
    }
)


class _Reject(Exception):
    """A request answered by the gateway itself (400, 413, 429)."""

    def __init__(self, response: Response) -> None:
        self.response = response


def handle_completion(
    gw: Gateway, request: Request, conn: FrontConn, api: Api
) -> Response | Awaitable[Response | None]:
    """Proxy one /v1/chat/completions or /v1/completions request.

    The part up to sending upstream runs here, in the callback that read the request; the
    answer the gateway gives itself (400, 429) comes back at once, else the awaitable that
    streams the upstream's answer (to None) or an error response.
    """
    t0, started_at = perf_counter(), time.time()
    try:
        body, ex, strip_usage = _admit(gw, request, api, (t0, started_at), _peer(conn))
    except _Reject as rej:
        return rej.response
    ids = gw.tracing.ids_for(request.headers)
    ex.trace_id, ex.span_id = ids.trace_id_hex, f"{ids.span_id:016x}"
    headers = _upstream_headers(
        request.headers, gw.api_keys.get(ex.decision.served_lane), gw.classifier.token
    )
    gw.tracing.inject(ids, headers)
    flight = begin(gw, ex, UpstreamRequest(request.method, request.target, headers, body, strip_usage))
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


def _peer(conn: FrontConn) -> str | None:
    """The client's IP address, for the hint trust check."""
    peer = conn.transport.get_extra_info("peername") if conn.transport is not None else None
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


def _admit(
    gw: Gateway, request: Request, api: Api, times: tuple[float, float], peer: str | None
) -> tuple[bytes, Exchange, bool]:
    """Classify, route and degrade the request; returns the upstream body and whether to strip usage."""
    t0, started_at = times
    raw = request.body
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
        raise _Reject(error_response(400, "the request body is not valid JSON")) from None
    if not isinstance(body, dict):
        raise _Reject(error_response(400, "the request body must be a JSON object"))
    try:
        cls, info = classify_request(gw.classifier, request.headers, peer, body, api)
    except ClassHintError as exc:
        raise _Reject(error_response(400, str(exc), param=gw.cfg.class_header)) from None
    except ReadingError as exc:  # vLLM would refuse it too: before it can pass a shed as a small request
        raise _Reject(error_response(400, str(exc), param=exc.field)) from None
    requested = body.get("model")
    requested = requested if isinstance(requested, str) else None
    if requested is not None and gw.models.complete and not gw.models.known(requested):
        raise _Reject(error_response(404, gw.models.unknown_model_message(requested), param="model"))
    try:
        routed = choose_lane(gw.routes, info)
    except RouteError as exc:
        raise _Reject(error_response(400, str(exc), param=LANE_HEADER)) from None
    decision = decide(gw.degrade, routed.lane, cls, gw.shifter)
    if decision.shed:
        raise _Reject(_shed(gw, decision, cls))
    actions: tuple[str, ...] = decision.actions
    served = serve_as(gw.models, decision.served_lane, requested) if requested is not None else None
    rewritten = changed = served != requested
    if rewritten:
        body["model"] = served  # re-encoded below, with any other change, in one dumps
    if decision.cap_max_tokens is not None and cap_max_tokens(body, decision.cap_max_tokens, api):
        actions = (*actions, "cap_max_tokens")
        changed = True
    absent = "stream_options" not in body
    strip = _ask_usage(body)
    if strip and absent and not changed:
        raw = _append_usage_option(raw) or json.dumps(body, separators=(",", ":")).encode()
    elif changed or strip:
        raw = json.dumps(body, separators=(",", ":")).encode()
    _count(gw, decision.routed_lane, decision.served_lane, actions)
    # As the record will hold them: bounded, and without a lone surrogate (a "\ud800" in the
    # body), which no UTF-8 encoder (span export, /metrics) takes.
    model = clean_text(served, MAX_LABEL_CHARS) if served is not None else ""
    ex = Exchange(api, t0, started_at, cls, model, decision, actions)
    if requested is not None and served is not None:
        ex.model_header = header_value(requested, served)
        ex.requested_model = clean_text(requested, MAX_ATTR_CHARS) if rewritten else None
    if gw.record_content:
        ex.prompt = request_messages(body, api)
    return raw, ex, strip


def _append_usage_option(raw: bytes) -> bytes | None:
    """The UTF-8 JSON object `raw` with `stream_options.include_usage` added as its last key, without
    decoding and encoding it again (a few µs a request); None when `raw` is not shaped for that."""
    text = raw.strip()
    if not (text.startswith(b"{") and text.endswith(b"}")):
        return None
    return text[:-1] + b',"stream_options":{"include_usage":true}}'


def _ask_usage(body: dict[str, Any]) -> bool:
    """Ask upstream for the usage chunk when the client did not; True when the gateway asked."""
    if body.get("stream") is not True:
        return False
    opts = body.get("stream_options")
    if opts is None:
        body["stream_options"] = {"include_usage": True}
        return True
    if isinstance(opts, dict) and not opts.get("include_usage"):
        opts["include_usage"] = True
        return True
    return False


def _shed(gw: Gateway, decision: Decision, cls: str) -> Response:
    lane = decision.served_lane
    gw.stats.shed[(decision.routed_lane, cls)] += 1  # against the lane promised (goodput counts it so)
    _count(gw, decision.routed_lane, lane, decision.actions)
    return error_response(
        429,
        f"lane {lane!r} is shedding request class {cls!r}; retry later",
        headers={
            "Retry-After": str(gw.cfg.shed_retry_after_s),
            LANE_HEADER: lane,
            DEGRADED_HEADER: ",".join(decision.actions),
        },
    )


def _count(gw: Gateway, lane: str, served: str, actions: tuple[str, ...]) -> None:
    gw.stats.requests[(lane, served, ",".join(actions) or "none")] += 1
    for action in actions:
        gw.stats.degrade_applied[(lane, action)] += 1


def _upstream_headers(
    incoming: Mapping[str, str], api_key: str | None, hint_token: str | None = None
) -> CIMultiDict[str]:
    """The client's headers, repeats kept, less hop-by-hop ones and Accept-Encoding (the tap reads plain),
    and less any Authorization that carries the hint token (a credential for the gateway alone)."""
    out = CIMultiDict(
        (k, v)
        for k, v in incoming.items()
        if k.lower() not in _HOP and not (hint_token is not None and _carries(k, v, hint_token))
    )
    if api_key is not None:
        # Replaces every Authorization the client sent; written in the case clients and servers log.
        out[AUTHORIZATION.title()] = f"Bearer {api_key}"
    return out


def _carries(name: str, value: str, token: str) -> bool:
    return name.lower() == _AUTH_HEADER and holds_token(value, token)


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
