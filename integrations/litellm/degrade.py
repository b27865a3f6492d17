"""The degrade state the LiteLLM handler holds and applies in the pre-call hook; its admin endpoint.

The degrade controller's `litellm` adapter PUTs the whole state to `PUT /admin/degrade` here, in
the gateway's own wire format (collector/common/degrade_wire.py), and reads it back with
`GET /admin/degrade` (the revision the proxy holds). The endpoint is a stdlib HTTP server on a
thread of its own (LiteLLM's routes belong to LiteLLM), on 127.0.0.1 unless told otherwise, behind
a bearer token. The state is one immutable value swapped whole, so the hook on the proxy's event
loop reads it without a lock. A proxy the controller cannot reach keeps the last state it took.

Per request (`plan`): the gateway's `decide` (collector/common/degrade_state.py) on the lane of
the request's model group and its class; a shift rewrites the model group to the serving lane's,
a cap clamps the output bound vLLM reads with the gateway's `cap_max_tokens`, a shed is a 429.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lanewatch.collector.common.bearer import bearer_ok
from lanewatch.collector.common.degrade_state import (
    Decision,
    DegradeError,
    DegradeState,
    Shifter,
    cap_max_tokens,
    decide,
    is_stale,
    parse_put,
)
from lanewatch.collector.record.timing import Api

__all__ = ["ADMIN_PATH", "DegradeHolder", "Plan", "plan", "serve_admin"]

log = logging.getLogger("lanewatch.litellm.degrade")
ADMIN_PATH = "/admin/degrade"
_MAX_BODY = 64 * 1024


class DegradeHolder:
    """The state the proxy holds: replaced whole by a PUT, read by every request."""

    def __init__(self, lane_order: tuple[str, ...]) -> None:
        self.lane_order = lane_order
        self.state = DegradeState()
        self._lock = threading.Lock()  # PUTs from the admin server's threads, one at a time

    def put(self, body: Any) -> tuple[int, dict[str, Any]]:
        """Take a PUT body: (status, answer); 400 naming the bad field, 409 for a stale revision."""
        try:
            put = parse_put(body, self.lane_order)
        except DegradeError as e:
            return 400, {"error": {"message": str(e)}}
        with self._lock:
            if is_stale(self.state, put.revision):
                stale = f"revision {put.revision} is older than {self.state.revision}"
                return 409, {"error": {"message": stale}}
            self.state = self.state.replaced(put.lanes, put.revision)
        return 200, self.get()

    def get(self) -> dict[str, Any]:
        """The state as `GET /admin/degrade` answers it."""
        return self.state.to_json(self.lane_order)


@dataclass(frozen=True, slots=True)
class Plan:
    """What degrade does to one request: the model group to send, the cap, whether it is shed."""

    decision: Decision
    model_group: str | None = None  # set when a shift moves it
    capped: bool = False


def plan(
    state: DegradeState,
    data: dict[str, Any],
    lane: str,
    cls: str,
    lane_groups: Mapping[str, str],
    shifter: Shifter,
    api: Api,
) -> Plan:
    """Apply the state to a request body for `lane`, in place (model group, cap); its Plan."""
    decision = decide(state, lane, cls, shifter)
    if decision.shed:
        return Plan(decision)
    group = None
    if decision.served_lane != lane and (group := lane_groups.get(decision.served_lane)) is not None:
        data["model"] = group
    capped = False
    if decision.cap_max_tokens is not None:
        capped = cap_max_tokens(data, decision.cap_max_tokens, api)
    return Plan(decision, group, capped)


def _handler(holder: DegradeHolder, token: str | None) -> type[BaseHTTPRequestHandler]:
    class Admin(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # the base's signature
            log.debug(format, *args)

        def _answer(self, status: int, body: Mapping[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _allowed(self) -> bool:
            if self.path.split("?")[0] != ADMIN_PATH:
                self._answer(404, {"error": {"message": "not found"}})
                return False
            if token is not None and not bearer_ok(self.headers.get("Authorization"), token):
                self._answer(401, {"error": {"message": "a bearer token is required"}})
                return False
            return True

        def do_GET(self) -> None:
            if self._allowed():
                self._answer(200, holder.get())

        def do_PUT(self) -> None:
            if not self._allowed():
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY:
                self._answer(413, {"error": {"message": "body too large"}})
                return
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                self._answer(400, {"error": {"message": "the body is not JSON"}})
                return
            self._answer(*holder.put(body))

    return Admin


def serve_admin(holder: DegradeHolder, host: str, port: int, token: str | None) -> ThreadingHTTPServer:
    """Serve GET/PUT /admin/degrade on a daemon thread; the server (its port is server_address[1])."""
    server = ThreadingHTTPServer((host, port), _handler(holder, token))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="lanewatch-admin", daemon=True).start()
    return server
