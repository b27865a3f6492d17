"""The data path: route one OpenAI request, apply degrade, stream the upstream answer through, tap it.

Bytes go downstream as they arrive, unchanged (save the usage event the gateway asked
for itself, see tap.py). A client that goes away cancels the handler, which closes the
upstream connection. Failures before the response starts become OpenAI error JSON with
502/504; a stream that breaks later gets an error frame.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from lanewatch.collector.timing import Api, ErrorKind, RequestTiming, error_kind_for_status

from .core import Gateway
from .degrade_state import Decision, cap_max_tokens, decide
from .errors import error_kind_of, error_response, sse_error_event, status_for
from .leg import LegTimes
from .pool import Upstream
from .routing import RouteError, choose_lane, route_input
from .tap import StreamTap

__all__ = ["DEGRADED_HEADER", "LANE_HEADER", "handle_completion"]

LANE_HEADER = "x-lanewatch-lane"
DEGRADED_HEADER = "x-lanewatch-degraded"
_CLASS = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
# Hop-by-hop and gateway-owned headers: never passed upstream as the client sent them.
_HOP = frozenset(
    {
        *("connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer"),
        *("transfer-encoding", "upgrade", "host", "content-length", "accept-encoding"),
        *("traceparent", "tracestate", LANE_HEADER),
    }
)
_HOP_BACK = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "upgrade", "content-length", "date", "server"}
)


class _Reject(Exception):
    """A request answered by the gateway itself (400, 413, 429)."""

    def __init__(self, response: web.Response) -> None:
        self.response = response


@dataclass(slots=True)
class _Exchange:
    """One request in flight: what the record will say."""

    api: Api
    t0: float
    started_at: float
    request_class: str
    model: str
    decision: Decision
    actions: tuple[str, ...]
    upstream: Upstream | None = None
    leg: LegTimes = field(default_factory=LegTimes)
    tap: StreamTap | None = None
    status: int | None = None
    error: ErrorKind | None = None
    request_id: str | None = None
    trace_id: str | None = None
    end: float | None = None


async def handle_completion(gw: Gateway, request: web.Request, api: Api) -> web.StreamResponse:
    """Proxy one /v1/chat/completions or /v1/completions request."""
    t0, started_at = perf_counter(), time.time()
    try:
        body, ex, strip = await _admit(gw, request, api, t0, started_at)
    except _Reject as rej:
        return rej.response
    served = ex.decision.served_lane
    span = gw.tracing.start(
        f"POST {request.path}",
        request.headers,
        {
            "http.request.method": "POST",
            "url.path": request.path,
            "gen_ai.operation.name": "chat" if api == "chat" else "text_completion",
            "gen_ai.request.model": ex.model,
            "lanewatch.lane": ex.decision.routed_lane,
            "lanewatch.served_lane": served,
            "lanewatch.request_class": ex.request_class,
        },
    )
    ex.trace_id = gw.tracing.trace_id(span)
    headers = _upstream_headers(request.headers, gw.api_keys.get(served))
    gw.tracing.inject(span, headers)
    try:
        return await _forward(gw, request, ex, body, headers, strip)
    finally:
        ex.end = perf_counter()
        _finish_span(span, ex)
        gw.emit(_record(ex))


async def _admit(
    gw: Gateway, request: web.Request, api: Api, t0: float, started_at: float
) -> tuple[bytes, _Exchange, bool]:
    """Read, route and degrade the request; returns the upstream body and whether to strip usage."""
    raw = await _read_body(gw, request)
    try:
        body = json.loads(raw)
    except ValueError:
        raise _Reject(error_response(400, "the request body is not valid JSON")) from None
    if not isinstance(body, dict):
        raise _Reject(error_response(400, "the request body must be a JSON object"))
    cls = (request.headers.get(gw.cfg.class_header) or gw.cfg.default_class).strip().lower()
    if not _CLASS.match(cls):
        raise _Reject(error_response(400, f"bad request class {cls[:40]!r}", param=gw.cfg.class_header))
    try:
        routed = choose_lane(gw.routes, route_input(body, request.headers.get(LANE_HEADER)))
    except RouteError as exc:
        raise _Reject(error_response(400, str(exc), param=LANE_HEADER)) from None
    decision = decide(gw.degrade, routed.lane, cls, gw.shifter)
    if decision.shed:
        raise _Reject(_shed(gw, decision, cls))
    actions: tuple[str, ...] = decision.actions
    changed = False
    if decision.cap_max_tokens is not None and cap_max_tokens(body, decision.cap_max_tokens):
        actions = (*actions, "cap_max_tokens")
        changed = True
    strip = _ask_usage(body)
    if changed or strip:
        raw = json.dumps(body, separators=(",", ":")).encode()
    _count(gw, decision.routed_lane, decision.served_lane, actions)
    model = body.get("model")
    ex = _Exchange(api, t0, started_at, cls, model if isinstance(model, str) else "", decision, actions)
    return raw, ex, strip


async def _read_body(gw: Gateway, request: web.Request) -> bytes:
    limit = gw.cfg.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise _Reject(error_response(413, f"the request body is larger than {limit} bytes"))
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise _Reject(error_response(413, f"the request body is larger than {limit} bytes")) from None


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


def _shed(gw: Gateway, decision: Decision, cls: str) -> web.Response:
    lane = decision.served_lane
    gw.stats.shed[(lane, cls)] += 1
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


def _upstream_headers(incoming: CIMultiDictProxy[str], api_key: str | None) -> CIMultiDict[str]:
    out = CIMultiDict((k, v) for k, v in incoming.items() if k.lower() not in _HOP)
    out["Accept-Encoding"] = "identity"  # the tap reads plain bytes
    if api_key is not None:
        out["Authorization"] = f"Bearer {api_key}"
    return out


async def _forward(
    gw: Gateway, request: web.Request, ex: _Exchange, body: bytes, headers: CIMultiDict[str], strip: bool
) -> web.StreamResponse:
    pool = gw.pools[ex.decision.served_lane]
    tried: list[Upstream] = []
    assert gw.session is not None
    while True:
        up = pool.pick(exclude=tried)
        if up is None:
            return _fail(ex, ErrorKind.CONNECT, f"lane {pool.lane!r} has no upstream left to try")
        ex.upstream, ex.leg = up, LegTimes(start=perf_counter())
        up.outstanding += 1
        try:
            upstream = await gw.session.post(
                up.url + request.path,
                data=body,
                headers=headers,
                ssl=gw.ssl[pool.lane],
                trace_request_ctx=ex.leg,
            )
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:  # nothing was sent
            up.outstanding -= 1
            pool.failed(up)
            tried.append(up)
            _count_error(gw, up, error_kind_of(exc))
            if len(tried) < len(pool.upstreams):
                continue
            return _fail(ex, error_kind_of(exc), f"upstream {up.name} of lane {pool.lane!r}: {_reason(exc)}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            up.outstanding -= 1
            pool.failed(up)
            _count_error(gw, up, error_kind_of(exc))
            return _fail(ex, error_kind_of(exc), f"upstream {up.name} of lane {pool.lane!r}: {_reason(exc)}")
        try:
            return await _stream(gw, request, ex, upstream, strip)
        finally:
            up.outstanding -= 1
            if upstream.status >= 500 or ex.error in (
                ErrorKind.TIMEOUT,
                ErrorKind.STALL,
                ErrorKind.TRUNCATED,
            ):
                pool.failed(up)
            else:
                pool.succeeded(up)


async def _stream(
    gw: Gateway, request: web.Request, ex: _Exchange, upstream: aiohttp.ClientResponse, strip: bool
) -> web.StreamResponse:
    ex.request_id = upstream.headers.get("x-request-id")
    ex.status = upstream.status
    ex.error = error_kind_for_status(upstream.status)
    if upstream.status >= 400 and upstream.content_type != "application/json":
        return await _wrap_error(ex, upstream)
    sse = upstream.content_type == "text/event-stream"
    resp = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    for k, v in upstream.headers.items():
        if k.lower() not in _HOP_BACK:
            resp.headers.add(k, v)
    if not sse and upstream.content_length is not None:
        resp.content_length = upstream.content_length
    resp.headers[LANE_HEADER] = ex.decision.served_lane
    if ex.actions:
        resp.headers[DEGRADED_HEADER] = ",".join(ex.actions)
    tap = ex.tap = StreamTap(ex.api, sse=sse, strip_usage=strip)
    try:
        await resp.prepare(request)
        await _pump(upstream, resp, tap)
        await resp.write_eof()
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, TimeoutError) as exc:
        upstream.close()
        ex.error = ErrorKind.STALL if isinstance(exc, TimeoutError) else ErrorKind.TRUNCATED
        await _write_quietly(
            resp, sse_error_event(status_for(ex.error), f"upstream: {_reason(exc)}") if sse else b""
        )
    except ConnectionResetError:  # the client went away while we wrote
        upstream.close()  # drop the upstream request too
        ex.error = ErrorKind.CLIENT_DISCONNECT
    except asyncio.CancelledError:  # the client went away while we waited (handler cancellation)
        upstream.close()
        ex.error = ErrorKind.CLIENT_DISCONNECT
        raise
    finally:
        upstream.release()
    if ex.error is None:
        ex.error = _stream_verdict(tap, sse)
    return resp


async def _wrap_error(ex: _Exchange, upstream: aiohttp.ClientResponse) -> web.Response:
    """An upstream error that is not JSON (a proxy's HTML page, plain text) becomes OpenAI error JSON."""
    try:
        text = (await upstream.content.read(300)).decode("utf-8", "replace").strip()
    except (aiohttp.ClientError, TimeoutError):
        text = ""
    finally:
        upstream.release()
    name = ex.upstream.name if ex.upstream is not None else "?"
    message = f"upstream {name} answered {upstream.status} {upstream.reason or ''}".rstrip()
    if text:
        message = f"{message}: {text}"
    headers = {LANE_HEADER: ex.decision.served_lane}
    if ex.actions:
        headers[DEGRADED_HEADER] = ",".join(ex.actions)
    return error_response(upstream.status, message, headers=headers)


async def _pump(upstream: aiohttp.ClientResponse, resp: web.StreamResponse, tap: StreamTap) -> None:
    """The hot loop: each upstream read goes downstream at once; the tap only counts."""
    read, write, feed, seen = upstream.content.readany, resp.write, tap.feed, tap.content_written
    while data := await read():
        out, n = feed(data)
        if out:
            await write(out)
        if n:
            seen(perf_counter(), n)
    rest = tap.flush()
    if rest:
        await write(rest)


def _stream_verdict(tap: StreamTap, sse: bool) -> ErrorKind | None:
    if tap.stream_error and sse:
        return ErrorKind.STREAM_ERROR
    if tap.bad_stream:
        return ErrorKind.BAD_STREAM
    if sse and not tap.done:
        return ErrorKind.TRUNCATED
    return None


async def _write_quietly(resp: web.StreamResponse, data: bytes) -> None:
    try:
        if data:
            await resp.write(data)
        await resp.write_eof()
    except (ConnectionResetError, RuntimeError):
        pass


def _fail(ex: _Exchange, kind: ErrorKind, message: str) -> web.Response:
    status = status_for(kind)
    ex.status, ex.error = status, kind
    headers = {LANE_HEADER: ex.decision.served_lane}
    if ex.actions:
        headers[DEGRADED_HEADER] = ",".join(ex.actions)
    return error_response(status, message, headers=headers)


def _count_error(gw: Gateway, up: Upstream, kind: ErrorKind) -> None:
    gw.stats.upstream_errors[(up.lane, up.name, kind.value)] += 1


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:200]


def _finish_span(span: Any, ex: _Exchange) -> None:
    if ex.status is not None:
        span.set_attribute("http.response.status_code", ex.status)
    if ex.upstream is not None:
        span.set_attribute("server.address", ex.upstream.name)
    if ex.actions:
        span.set_attribute("lanewatch.degraded", ",".join(ex.actions))
    tap = ex.tap
    if tap is not None and tap.completion_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", tap.completion_tokens)
    if tap is not None and tap.prompt_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", tap.prompt_tokens)
    if ex.error is not None:
        span.set_attribute("error.type", ex.error.value)
    span.end()


def _record(ex: _Exchange) -> RequestTiming:
    """The tap's record of one proxied request; times are offsets from the gateway receiving it."""
    leg, tap, t0 = ex.leg, ex.tap, ex.t0
    up = ex.upstream
    tokens_from_usage = tap is not None and tap.has_usage
    output = (tap.completion_tokens if tokens_from_usage else tap.content_events) if tap is not None else None
    attrs = {"routed_lane": ex.decision.routed_lane, "degraded": ",".join(ex.actions) or "none"}
    if up is not None:
        attrs["upstream"] = up.name
    return RequestTiming(
        source="tap",
        target=up.name if up is not None else ex.decision.served_lane,
        lane=ex.decision.served_lane,
        request_class=ex.request_class,
        model=ex.model,
        api=ex.api,
        started_at=ex.started_at,
        request_id=ex.request_id,
        trace_id=ex.trace_id,
        status=ex.status,
        error=ex.error,
        dns_s=leg.dns_s,
        connect_s=leg.connect_s,
        send_s=leg.send_s,
        ttfb_s=None if leg.headers is None else leg.headers - t0,
        ttft_s=None if tap is None or tap.first_content_at is None else tap.first_content_at - t0,
        e2e_s=None if ex.end is None else ex.end - t0,
        itl_s=tuple(tap.gaps) if tap is not None else (),
        prompt_tokens=tap.prompt_tokens if tap is not None else None,
        output_tokens=output,
        tokens_from_usage=tokens_from_usage,
        attrs=attrs,
    )
