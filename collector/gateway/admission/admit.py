"""Admission: what the gateway does with one completion request before anything goes upstream.

It reads the JSON body, classes the request (classify.py), routes it to a lane (routing.py),
applies the degrade state (a shift, a cap on the request's work or a shed), serves the lane's name
for the model (lane_models.py) and asks upstream for the usage chunk when the client did not. A
request it refuses (bad JSON, a bad hint or count, an unknown model, a bad lane header, a shed, a
work no max_tokens brings under the cap) gets its answer here, without an upstream.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from lanewatch.collector.common.headers import DEGRADED_HEADER, LANE_HEADER
from lanewatch.collector.degrade_state.state import (
    Decision,
    DegradeState,
    Shifter,
    WorkOverCap,
    cap_max_tokens,
    decide,
)
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.openai_api.request_reading import ReadingError
from lanewatch.collector.record.content import Message, request_messages
from lanewatch.collector.record.rules import MAX_ATTR_CHARS, MAX_LABEL_CHARS, clean_text
from lanewatch.collector.record.timing import Api

from ..front.connection import Request, Response
from ..front.errors import error_response
from .classify import ClassHintError, Classifier, classify_request
from .lane_models import LaneModels, header_value, serve_as
from .routing import RouteError, RouteTable, choose_lane

__all__ = ["Admission", "Admitting", "admit"]


class AdmissionCounts(Protocol):
    """The counters admission adds to."""

    @property
    def requests(self) -> Counter[tuple[str, str, str]]: ...  # lane, served lane, degraded
    @property
    def shed(self) -> Counter[tuple[str, str]]: ...  # lane, request class
    @property
    def degrade_applied(self) -> Counter[tuple[str, str]]: ...  # lane, action


class Admitting(Protocol):
    """What admission reads of the gateway: its settings, classes, routes, models, degrade state."""

    @property
    def cfg(self) -> GatewayConfig: ...
    @property
    def classifier(self) -> Classifier: ...
    @property
    def routes(self) -> RouteTable: ...
    @property
    def models(self) -> LaneModels: ...
    @property
    def degrade(self) -> DegradeState: ...
    @property
    def shifter(self) -> Shifter: ...
    @property
    def record_content(self) -> bool: ...
    @property
    def stats(self) -> AdmissionCounts: ...


@dataclass(slots=True)
class Admission:
    """An admitted request: the body that goes upstream and what was decided for it."""

    body: bytes  # as the upstream gets it: the client's bytes unless a rewrite, cap or usage ask changed it
    strip_usage: bool  # the gateway asked for the usage chunk itself: the client does not get it
    request_class: str
    model: str  # the model the serving lane is asked for, bounded as the record holds it
    decision: Decision
    actions: tuple[str, ...]  # degrade actions applied, in header order
    model_header: str | None = None  # x-lanewatch-model's value; None when the body names no model
    requested_model: str | None = None  # set only when the gateway rewrote the model
    asked: str | None = None  # the model the body names, as the client named it (a rescue asks anew)
    prompt: list[Message] | None = None  # the request's messages, kept only with record_content
    # the body asked `"stream": true`: only a streamed answer has a first token the fast guard can judge
    streamed: bool = False


class _Refused(Exception):
    """A request the gateway answers itself (400, 404, 429): its response."""

    def __init__(self, response: Response) -> None:
        self.response = response


def admit(gw: Admitting, request: Request, api: Api, peer: str | None) -> Admission | Response:
    """Class, route and degrade one request; or the answer the gateway gives it itself (400, 404, 429)."""
    try:
        return _admit(gw, request, api, peer)
    except _Refused as refused:
        return refused.response


def _admit(gw: Admitting, request: Request, api: Api, peer: str | None) -> Admission:
    raw = request.body
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
        raise _Refused(error_response(400, "the request body is not valid JSON")) from None
    if not isinstance(body, dict):
        raise _Refused(error_response(400, "the request body must be a JSON object"))
    try:
        cls, info = classify_request(gw.classifier, request.headers, peer, body, api)
    except ClassHintError as exc:
        raise _Refused(error_response(400, str(exc), param=gw.cfg.class_header)) from None
    except ReadingError as exc:  # vLLM would refuse it too: before it can pass a shed as a small request
        raise _Refused(error_response(400, str(exc), param=exc.field)) from None
    requested = body.get("model")
    requested = requested if isinstance(requested, str) else None
    if requested is not None and gw.models.complete and not gw.models.known(requested):
        raise _Refused(error_response(404, gw.models.unknown_model_message(requested), param="model"))
    try:
        routed = choose_lane(gw.routes, info)
    except RouteError as exc:
        raise _Refused(error_response(400, str(exc), param=LANE_HEADER)) from None
    decision = decide(gw.degrade, routed.lane, cls, gw.shifter)
    if decision.shed:
        raise _Refused(_shed(gw, decision, cls))
    actions: tuple[str, ...] = decision.actions
    served = serve_as(gw.models, decision.served_lane, requested) if requested is not None else None
    rewritten = changed = served != requested
    if rewritten:
        body["model"] = served  # re-encoded below, with any other change, in one dumps
    try:
        cap = decision.cap_max_tokens
        if cap is not None and cap_max_tokens(body, cap, api, info.work_units):
            actions = (*actions, "cap_max_tokens")
            changed = True
    except WorkOverCap as exc:  # n x prompts alone exceed the cap: refused while the cap holds
        raise _Refused(_over_cap(gw, decision, str(exc))) from None
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
    admitted = Admission(raw, strip, cls, model, decision, actions)
    admitted.streamed = body.get("stream") is True
    if requested is not None and served is not None:
        admitted.asked = requested
        admitted.model_header = header_value(requested, served)
        admitted.requested_model = clean_text(requested, MAX_ATTR_CHARS) if rewritten else None
    if gw.record_content:
        admitted.prompt = request_messages(body, api)
    return admitted


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


def _shed(gw: Admitting, decision: Decision, cls: str) -> Response:
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


def _over_cap(gw: Admitting, decision: Decision, message: str) -> Response:
    actions = (*decision.actions, "cap_max_tokens")
    _count(gw, decision.routed_lane, decision.served_lane, actions)
    return error_response(
        429,
        message,
        headers={
            "Retry-After": str(gw.cfg.shed_retry_after_s),
            LANE_HEADER: decision.served_lane,
            DEGRADED_HEADER: ",".join(actions),
        },
    )


def _count(gw: Admitting, lane: str, served: str, actions: tuple[str, ...]) -> None:
    gw.stats.requests[(lane, served, ",".join(actions) or "none")] += 1
    for action in actions:
        gw.stats.degrade_applied[(lane, action)] += 1
