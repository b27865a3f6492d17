"""`GET`/`PUT /admin/degrade` (contract in docs/gateway.md): the degrade controller's handle on the gateway.

Bearer token compared in constant time. Without a token file the API answers 403
unless `admin_insecure` is set. A PUT replaces the whole state or, on any problem,
answers 400 with the reason and changes nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from lanewatch.collector.common.bearer import bearer_ok
from lanewatch.collector.common.headers import AUTHORIZATION

from .core import Gateway
from .degrade_state import DegradeError, parse_degrade
from .errors import error_response
from .front import FrontConn, Request, Response

__all__ = ["denied", "get_degrade", "put_degrade"]

log = logging.getLogger("lanewatch.gateway.admin")
MAX_ADMIN_BODY = 64 * 1024


def _denied(gw: Gateway, request: Request) -> Response | None:
    return denied(gw, request.headers)


def denied(gw: Gateway, headers: Mapping[str, str]) -> Response | None:
    """None when a request with these headers may use the admin API, else the response that refuses it."""
    token = gw.admin_token
    if token is None:
        if gw.cfg.admin_insecure:
            return None
        return error_response(403, "the admin API is off: start the gateway with --admin-token-file")
    if not bearer_ok(headers.get(AUTHORIZATION), token):
        return error_response(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})
    return None


def _state(gw: Gateway) -> Response:
    return Response(200, json.dumps(gw.degrade.to_json(gw.lane_order)).encode())


async def get_degrade(gw: Gateway, request: Request, _conn: FrontConn) -> Response:
    """The whole degrade state, lane order and version."""
    return _denied(gw, request) or _state(gw)


async def put_degrade(gw: Gateway, request: Request, _conn: FrontConn) -> Response:
    """Replace the degrade state; 400 with a reason (and no change) on bad input."""
    denied = _denied(gw, request)
    if denied is not None:
        return denied
    raw = request.body  # whole: the front read all of it (up to max_body_bytes) before dispatching
    if len(raw) > MAX_ADMIN_BODY:
        return error_response(413, f"the body is larger than {MAX_ADMIN_BODY} bytes")
    try:
        lanes = parse_degrade(json.loads(raw), gw.lane_order)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, DegradeError; too deep a nesting
        reason = str(exc) if isinstance(exc, DegradeError) else f"body is not valid JSON: {str(exc)[:200]}"
        return error_response(400, reason)
    before = gw.degrade.version
    state = gw.set_degrade(lanes)
    if state.version != before:
        log.warning("degrade state v%d: %s", state.version, json.dumps(state.to_json(gw.lane_order)["lanes"]))
    return _state(gw)
