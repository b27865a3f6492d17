"""The degrade state the LiteLLM handler holds and applies in the pre-call hook; its admin endpoint.

The degrade controller's `litellm` adapter PUTs the whole state to `PUT /admin/degrade` here, in
the gateway's own wire format (collector/degrade_state/wire.py), and reads it back with
`GET /admin/degrade` (the revision the proxy holds). The endpoint is a stdlib HTTP server on a
thread of its own (LiteLLM's routes belong to LiteLLM), on 127.0.0.1 unless told otherwise, behind
a bearer token. It meets a hostile client as any lanewatch listener does: a Content-Length that
is not one plain number within 64 KiB is refused before a byte of the body is read (a PUT
without one: 411), each connection's request must arrive within `admin_timeout_s`, and at most
`admin_max_connections` are served at once (one more is answered 503 and closed at once). The
state is one immutable value swapped whole, so the hook on the proxy's event
loop reads it without a lock. A proxy the controller cannot reach keeps the last state it took.

Per request (`plan`): the gateway's `decide` (collector/degrade_state/state.py) on the lane of
the request's model group and its class; a shift rewrites the model group to the serving lane's,
a cap clamps the output bound vLLM reads with the gateway's `cap_max_tokens`, a shed is a 429.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lanewatch.collector.common.secrets import bearer_ok
from lanewatch.collector.degrade_state.state import (
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

__all__ = ["ADMIN_PATH", "AdminServer", "DegradeHolder", "Plan", "body_length", "plan", "serve_admin"]

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


_LENGTH = re.compile(r"^[0-9]{1,10}$")
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class _DeadlineReader(io.RawIOBase):
    """A socket's reads, each given only what is left of the connection's time: a client that
    sends its request a byte at a time cannot hold its thread past the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock, self._deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the connection's time is up")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


def body_length(values: list[str] | None, method: str) -> tuple[int, str | None]:
    """A request's body length from its Content-Length header(s): (length, None), or (status,
    message naming the header) for one no server should read: missing on a PUT (411), not one
    plain decimal (a sign, a fraction, two values: 400), or over the bound (413)."""
    if not values:
        return (411, "Content-Length: required on a PUT") if method == "PUT" else (0, None)
    if len(values) > 1:
        return 400, "Content-Length: sent more than once"
    value = values[0].strip()
    if not _LENGTH.match(value):
        return 400, "Content-Length: not a non-negative whole number of bytes"
    if int(value) > _MAX_BODY:
        return 413, f"Content-Length: over {_MAX_BODY} bytes"
    return int(value), None


def _handler(holder: DegradeHolder, token: str | None, timeout_s: float) -> type[BaseHTTPRequestHandler]:
    class Admin(BaseHTTPRequestHandler):
        def setup(self) -> None:
            super().setup()
            self.rfile.close()  # the connection's whole request must arrive within timeout_s
            self.rfile = io.BufferedReader(_DeadlineReader(self.connection, time.monotonic() + timeout_s))

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
            if self.headers.get("Transfer-Encoding") is not None:
                self._answer(411, {"error": {"message": "Transfer-Encoding: not taken; send Content-Length"}})
                return
            length, refused = body_length(self.headers.get_all("Content-Length"), "PUT")
            if refused is not None:
                self._answer(length, {"error": {"message": refused}})
                return
            data = self.rfile.read(length)
            if len(data) < length:
                self._answer(400, {"error": {"message": "Content-Length: the body ended short of it"}})
                return
            try:
                body = json.loads(data or b"null")
            except ValueError:
                self._answer(400, {"error": {"message": "the body is not JSON"}})
                return
            self._answer(*holder.put(body))

    return Admin


class AdminServer(ThreadingHTTPServer):
    """The endpoint's server: one thread per connection, at most `max_connections` at once; one
    more is answered 503 and closed on the listening thread, never queued into a thread."""

    daemon_threads = True
    block_on_close = False

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_connections: int
    ) -> None:
        self._slots = threading.BoundedSemaphore(max_connections)
        self.refused = 0  # connections closed at once: the cap was reached
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread of its own when a slot is free; else refuse it now."""
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            with contextlib.suppress(OSError):
                request.setblocking(False)  # the listening thread never waits on this client
                request.send(_BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """The connection's thread; its slot is free again when it ends."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def serve_admin(
    holder: DegradeHolder,
    host: str,
    port: int,
    token: str | None,
    timeout_s: float = 5.0,
    max_connections: int = 16,
) -> AdminServer:
    """Serve GET/PUT /admin/degrade on a daemon thread; the server (its port is server_address[1])."""
    server = AdminServer((host, port), _handler(holder, token, timeout_s), max_connections)
    threading.Thread(target=server.serve_forever, name="lanewatch-admin", daemon=True).start()
    return server
