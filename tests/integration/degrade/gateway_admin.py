"""A real HTTP server on 127.0.0.1 implementing the gateway admin API contract (docs/gateway.md).

It stands in for the lanewatch gateway until that lands: `GET`/`PUT /admin/degrade` with a
bearer token, the whole state replaced declaratively, 400 with a reason (and no change) for
an unknown lane, a shift not to a faster lane, a percent outside 0..100, a cap below 1; 409
for a revision older than the last one taken.
It runs an aiohttp app on its own thread and loop, so sync tests and subprocesses can use it.
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.waiting import eventually

LANE_KEYS = {"shift_to", "shift_percent", "cap_max_tokens", "shed_classes"}


class Invalid(Exception):
    pass


@dataclass
class GatewayAdmin:
    """The admin API's state and what it has been asked; read from the test thread."""

    lane_order: list[str]
    token: str | None
    url: str = ""
    lanes: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    revision: int | None = None
    puts: list[tuple[float, dict[str, Any]]] = field(default_factory=list)  # (monotonic time, lanes)
    states: list[dict[str, Any]] = field(default_factory=list)  # each distinct state held, in order
    taken: list[tuple[int | None, dict[str, Any]]] = field(default_factory=list)  # (revision, lanes) per PUT
    fail_next: list[int] = field(default_factory=list)  # statuses to answer before serving again
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"lanes": self.lanes, "lane_order": self.lane_order, "version": self.version}

    def forget(self) -> None:
        """Lose the degrade state, as a restarted gateway would."""
        with self.lock:
            self.lanes, self.version, self.revision = {}, self.version + 1, None

    def wait_for(self, check: Callable[[GatewayAdmin], bool], timeout: float, what: str) -> None:
        """Wait until `check` holds on this gateway's state (read under its lock)."""

        def holds() -> bool:
            with self.lock:
                return check(self)

        eventually(holds, timeout, f"the gateway sees {what}", context=lambda: f"states: {self.states}")

    def validate(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or set(body) - {"revision"} != {"lanes"}:
            raise Invalid("body must be {'lanes': {...}, 'revision': n}")
        if not isinstance(body["lanes"], dict):
            raise Invalid("body must be {'lanes': {...}, 'revision': n}")
        for lane, spec in body["lanes"].items():
            if lane not in self.lane_order:
                raise Invalid(f"unknown lane {lane!r}")
            if not isinstance(spec, dict) or set(spec) - LANE_KEYS:
                raise Invalid(f"lanes.{lane}: unknown keys {sorted(set(spec) - LANE_KEYS)}")
            to, pct = spec.get("shift_to"), spec.get("shift_percent", 0)
            if to is not None and (
                to not in self.lane_order or self.lane_order.index(to) >= self.lane_order.index(lane)
            ):
                raise Invalid(f"lanes.{lane}.shift_to: {to!r} is not faster than {lane!r}")
            if not isinstance(pct, int) or not 0 <= pct <= 100:
                raise Invalid(f"lanes.{lane}.shift_percent: must be 0..100")
            cap = spec.get("cap_max_tokens")
            if cap is not None and (not isinstance(cap, int) or cap < 1):
                raise Invalid(f"lanes.{lane}.cap_max_tokens: must be >= 1")
            if not all(isinstance(c, str) for c in spec.get("shed_classes", [])):
                raise Invalid(f"lanes.{lane}.shed_classes: must be strings")
        return {
            lane: {
                "shift_to": s.get("shift_to"),
                "shift_percent": s.get("shift_percent", 0),
                "cap_max_tokens": s.get("cap_max_tokens"),
                "shed_classes": list(s.get("shed_classes", [])),
            }
            for lane, s in body["lanes"].items()
        }

    async def handle(self, request: web.Request) -> web.Response:
        if self.token is None:
            return web.json_response({"error": "admin API off"}, status=403)
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, f"Bearer {self.token}".encode()):
            return web.json_response({"error": "bad token"}, status=401)
        with self.lock:
            if self.fail_next:
                return web.json_response({"error": "injected"}, status=self.fail_next.pop(0))
        if request.method == "PUT":
            try:
                body = await request.json()
                lanes = self.validate(body)
            except (Invalid, ValueError) as exc:
                return web.json_response({"error": str(exc)}, status=400)
            with self.lock:
                revision = body.get("revision")
                if revision is not None and self.revision is not None and revision < self.revision:
                    stale = {"error": "stale revision", "revision": self.revision}
                    return web.json_response(stale, status=409)
                self.revision = revision
                self.puts.append((time.monotonic(), lanes))
                self.taken.append((revision, lanes))
                if lanes != self.lanes:
                    self.lanes, self.version = lanes, self.version + 1
                    self.states.append(lanes)
        return web.json_response(self.snapshot())


@contextmanager
def start_gateway_admin(
    token: str | None, lane_order: tuple[str, ...] = ("fast", "slow")
) -> Iterator[GatewayAdmin]:
    """Serve the admin API on a free 127.0.0.1 port for the duration of the block."""
    admin = GatewayAdmin(list(lane_order), token)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    app = web.Application()
    app.router.add_route("GET", "/admin/degrade", admin.handle)
    app.router.add_route("PUT", "/admin/degrade", admin.handle)
    runner = web.AppRunner(app, access_log=None)

    async def start() -> int:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return int(runner.addresses[0][1])

    admin.url = f"http://127.0.0.1:{asyncio.run_coroutine_threadsafe(start(), loop).result(10)}"
    try:
        yield admin
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
