"""`GET`/`PUT /admin/degrade` (contract in docs/gateway.md): the degrade controller's handle on the gateway.

Bearer token compared in constant time. Without a token file the API answers 403
unless `admin_insecure` is set. A PUT replaces the whole state or, on any problem,
answers 400 with the reason and changes nothing; 409 (also changing nothing) for a revision
older than the state's, or a shift to a lane whose models the gateway does not know (a
request shifted there would be asked for a model its engine may not serve: a 404).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.common.secrets import bearer_ok
from lanewatch.collector.degrade_state.state import (
    DegradeError,
    DegradePut,
    DegradeState,
    is_stale,
    parse_put,
    shifts_to_unknown_models,
)

from .connection import FrontConn, Request, Response
from .errors import error_body, error_response

if TYPE_CHECKING:  # the later rooms' types the admin API reads, for the checker only
    from lanewatch.collector.degrade_state.wire import LaneDegrade
    from lanewatch.collector.gateway.settings import GatewayConfig

    from ..admission.lane_models import LaneModels
    from ..admission.model_discovery import ModelLearner

__all__ = [
    "Administered",
    "checked_put",
    "denied",
    "get_degrade",
    "log_change",
    "put_degrade",
    "stale_refusal",
    "state_response",
]


class AdminCounts(Protocol):
    """The counter the admin API adds to."""

    @property
    def degrade_refused(self) -> Counter[str]: ...  # the reason a PUT was refused


class Administered(Protocol):
    """What the admin API reads and sets of the gateway: its token, lanes, models and degrade state."""

    @property
    def cfg(self) -> GatewayConfig: ...
    @property
    def admin_token(self) -> str | None: ...
    @property
    def lane_order(self) -> Sequence[str]: ...
    @property
    def models(self) -> LaneModels: ...
    @property
    def learner(self) -> ModelLearner | None: ...
    @property
    def degrade(self) -> DegradeState: ...
    @property
    def stats(self) -> AdminCounts: ...
    def set_degrade(self, lanes: dict[str, LaneDegrade], revision: int | None = None) -> DegradeState:
        """Replace the degrade state at the sender's revision; the new state."""
        ...


log = logging.getLogger("lanewatch.gateway.admin")
MAX_ADMIN_BODY = 64 * 1024


def _denied(gw: Administered, request: Request) -> Response | None:
    return denied(gw, request.headers)


def denied(gw: Administered, headers: Mapping[str, str]) -> Response | None:
    """None when a request with these headers may use the admin API, else the response that refuses it."""
    token = gw.admin_token
    if token is None:
        if gw.cfg.admin_insecure:
            return None
        return error_response(403, "the admin API is off: start the gateway with --admin-token-file")
    if not bearer_ok(headers.get(AUTHORIZATION), token):
        return error_response(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})
    return None


def state_response(gw: Administered) -> Response:
    """200 and the degrade state with the lanes' models (the GET answer)."""
    body = {**gw.degrade.to_json(gw.lane_order), "models": _models(gw)}
    return Response(200, json.dumps(body).encode())


def _models(gw: Administered) -> dict[str, dict[str, object]]:
    """Each lane's models and where they come from; for learning lanes, when and how they were last asked."""
    out: dict[str, dict[str, object]] = {}
    learner = gw.learner
    for lane in gw.lane_order:
        models = list(gw.models.served.get(lane, ()))
        entry: dict[str, object] = {"source": gw.models.source(lane), "models": models}
        if learner is not None and lane in learner.lanes:
            entry["checked_at"] = learner.checked_at.get(lane)
            entry["error"] = learner.errors.get(lane)
        out[lane] = entry
    return out


def _conflict(gw: Administered, reason: str, message: str, param: str) -> Response:
    """409 with the state's revision beside the OpenAI error, so a sender sees what it lost to."""
    gw.stats.degrade_refused[reason] += 1
    body = {**json.loads(error_body(409, message, param)), "revision": gw.degrade.revision}
    return Response(409, json.dumps(body).encode())


def _refusal(gw: Administered, put: DegradePut) -> Response | None:
    """The 409 for a stale revision or a shift to a lane of unknown models; None when the PUT may apply."""
    if is_stale(gw.degrade, put.revision):
        return stale_refusal(gw, put.revision)
    unknown = shifts_to_unknown_models(put.lanes, gw.models.served)
    if unknown:
        lane, target = unknown[0]
        message = (
            f"lanes.{lane}.shift_to: the models of lane {target!r} are not known, so a shifted request "
            f"could not be asked for one it serves; declare them (gateway.lanes.{target}.models or "
            f"--model {target}=NAME) or wait until its upstreams answer GET /v1/models"
        )
        return _conflict(gw, "models_unknown", message, f"lanes.{lane}.shift_to")
    return None


async def get_degrade(gw: Administered, request: Request, _conn: FrontConn) -> Response:
    """The whole degrade state, lane order and version."""
    return _denied(gw, request) or state_response(gw)


async def put_degrade(gw: Administered, request: Request, _conn: FrontConn) -> Response:
    """Replace the degrade state; 400 with a reason (and no change) on bad input."""
    put = checked_put(gw, request)
    if isinstance(put, Response):
        return put
    before = gw.degrade.version
    state = gw.set_degrade(put.lanes, put.revision)
    if state.version != before:
        log_change(state, gw.lane_order)
    return state_response(gw)


def checked_put(gw: Administered, request: Request) -> DegradePut | Response:
    """A PUT's body, validated against this gateway's lanes, models and revision; or the refusal."""
    denied = _denied(gw, request)
    if denied is not None:
        return denied
    raw = request.body  # whole: the front read all of it (up to max_body_bytes) before dispatching
    if len(raw) > MAX_ADMIN_BODY:
        return error_response(413, f"the body is larger than {MAX_ADMIN_BODY} bytes")
    try:
        put = parse_put(json.loads(raw), gw.lane_order)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, DegradeError; too deep a nesting
        reason = str(exc) if isinstance(exc, DegradeError) else f"body is not valid JSON: {str(exc)[:200]}"
        gw.stats.degrade_refused["invalid"] += 1
        return error_response(400, reason)
    return _refusal(gw, put) or put


def stale_refusal(gw: Administered, revision: int | None) -> Response:
    """The 409 for a PUT at `revision`, older than the state's."""
    message = f"revision {revision} is older than the degrade state's revision {gw.degrade.revision}"
    return _conflict(gw, "stale_revision", message, "revision")


def log_change(state: DegradeState, lane_order: Sequence[str]) -> None:
    """Log a new degrade state once, at warning level."""
    log.warning("degrade state v%d: %s", state.version, json.dumps(state.to_json(lane_order)["lanes"]))
