"""One completion request along the path: admit it, forward it upstream, tap the answer, record it.
A streamed request the rescue may take (upstream/rescue_policy.py) is forwarded as a race instead
(upstream/rescue.py): a second attempt goes to a faster lane if its first token is late.

Each stage is its room's (the gateway's face lists them); this module only hands the request
from one to the next. Bytes go downstream as they arrive, unchanged (save the usage event the
gateway asked for itself, see the tap). A client that goes away cancels the handler, which
closes the upstream connection. Failures before the response starts become OpenAI error JSON
with 502/504; a stream that breaks later gets an error frame.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable
from time import perf_counter

from lanewatch.collector.common.headers import RESCUE_HEADER
from lanewatch.collector.degrade_state.state import Decision
from lanewatch.collector.record.rules import MAX_ATTR_CHARS, MAX_LABEL_CHARS, RecordError, clean_text
from lanewatch.collector.record.timing import Api

from .admission.admit import Admission, admit
from .admission.lane_models import header_value, serve_as
from .front.connection import FrontConn, Request, Response
from .state import Gateway
from .tap.record import span_attributes, tap_record
from .tap.tracing import TraceIds
from .upstream.exchange import Exchange
from .upstream.forward import Flight, UpstreamRequest, begin, forward
from .upstream.request_headers import upstream_headers
from .upstream.rescue import Race, RescueRequest
from .upstream.rescue_policy import Plan

__all__ = ["handle_completion"]

log = logging.getLogger("lanewatch.gateway")


def handle_completion(
    gw: Gateway, request: Request, conn: FrontConn, api: Api
) -> Response | Awaitable[Response | None]:
    """Proxy one /v1/chat/completions or /v1/completions request.

    The part up to sending upstream runs here, in the callback that read the request; the
    answer the gateway gives itself (400, 404, 429) comes back at once, else the awaitable that
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
    opted_out = request.headers.get(RESCUE_HEADER, "").strip().lower() == "off"
    plan = gw.rescue.plan(ex.decision.served_lane, ex.request_class, admitted.streamed, opted_out, t0)
    if plan is not None:
        return _race(gw, request, conn, ex, flight, ids, plan, admitted)
    return _proxy(gw, request, conn, ex, flight, ids, admitted.streamed)


async def _proxy(
    gw: Gateway,
    request: Request,
    conn: FrontConn,
    ex: Exchange,
    flight: Flight,
    ids: TraceIds,
    streamed: bool,
) -> Response | None:
    # Only a streamed request is the fast guard's: a whole answer's first token is not observable, so
    # its age would be judged a TTFT miss once the answer outlasts the SLO (docs/slo.md, "The evidence
    # contract"). t0 is when the body had fully arrived: the client's upload is not the lane's.
    rid = (
        gw.in_flight.start(
            ex.decision.served_lane, ex.t0, lambda: None if ex.tap is None else ex.tap.first_content_at
        )
        if streamed
        else None
    )
    try:
        return await forward(gw, conn, ex, flight)
    finally:
        ex.end = perf_counter()
        if rid is not None:
            gw.in_flight.end(rid)
        first = ex.tap.first_content_at if ex.tap is not None else None
        if first is not None:
            gw.rescue.first_token(ex.decision.served_lane, first - ex.t0, first)
        _finish(gw, request, ex, ids)


async def _race(
    gw: Gateway,
    request: Request,
    conn: FrontConn,
    ex: Exchange,
    flight: Flight,
    ids: TraceIds,
    plan: Plan,
    admitted: Admission,
) -> Response | None:
    """A request that may be rescued: its attempts race (upstream/rescue.py); its record is made once
    every attempt ended, which for a late loser can be after the client has its answer."""
    race = Race(gw, conn, plan, lambda target: _rescue_request(gw, request, admitted, ex, ids, target))
    try:
        return await race.run(ex, flight)
    finally:
        if race.settled:
            _finish_race(gw, request, race, ids)
        else:
            task = asyncio.ensure_future(_settle(gw, request, race, ids))
            gw.settling.add(task)
            task.add_done_callback(gw.settling.discard)


async def _settle(gw: Gateway, request: Request, race: Race, ids: TraceIds) -> None:
    try:
        await race.settle()
    finally:
        race.cancel()
        _finish_race(gw, request, race, ids)


def _finish_race(gw: Gateway, request: Request, race: Race, ids: TraceIds) -> None:
    ex = race.exchange
    if ex.rescue is not None:
        ex.rescue.late_wait_s = race.late_wait_s()
    _finish(gw, request, ex, ids)


def _rescue_request(
    gw: Gateway, request: Request, admitted: Admission, first: Exchange, ids: TraceIds, target: str
) -> RescueRequest:
    """The second attempt of a late request: the same request, to `target`, asking for its model as a
    shift would (lane_models.py), in the same trace."""
    body, model, asked = admitted.body, first.model, admitted.asked
    if asked is not None:
        served = serve_as(gw.models, target, asked)
        model = clean_text(served, MAX_LABEL_CHARS)
        if served != serve_as(gw.models, first.decision.served_lane, asked):
            doc = json.loads(body)  # the admitted body: JSON the gateway already read
            doc["model"] = served
            body = json.dumps(doc, separators=(",", ":")).encode()
    d = first.decision
    decision = Decision(d.routed_lane, target, d.cap_max_tokens, actions=d.actions)
    ex = Exchange(first.api, first.t0, first.started_at, first.request_class, model, decision, first.actions)
    ex.prompt, ex.trace_id, ex.span_id = first.prompt, first.trace_id, first.span_id
    if asked is not None:
        ex.model_header = header_value(asked, served)
        ex.requested_model = clean_text(asked, MAX_ATTR_CHARS) if served != asked else None
    headers = upstream_headers(request.headers, gw.api_keys.get(target), gw.classifier.token)
    gw.tracing.inject(ids, headers)
    return RescueRequest(
        ex, UpstreamRequest(request.method, request.target, headers, body, admitted.strip_usage)
    )


def _finish(gw: Gateway, request: Request, ex: Exchange, ids: TraceIds) -> None:
    """The request's span and record, once its answer ended (or failed)."""
    try:
        record = tap_record(ex)
    except RecordError as exc:  # a time no reader could use: never shipped nor written
        log.error("no tap record for a request to lane %s: %s", ex.decision.served_lane, exc)
        return
    if gw.tracing.exporting:  # the attributes cost a few µs a request: only for a span that goes out
        start_ns = int(ex.started_at * 1e9)
        end_ns = start_ns + int(((ex.end or ex.t0) - ex.t0) * 1e9)
        attrs = span_attributes(request, ex, record)
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
