"""The gateway's listening socket: it accepts client connections (connection.py), caps how many are
open, closes the idle and the slow with one timer for all, and stops them all at shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from .connection import ErrorBody, FrontConn, FrontLimits, HeadCheck, Route

__all__ = ["FrontServer"]

log = logging.getLogger("lanewatch.gateway")


class FrontServer:
    """The listening socket and every open connection and handler."""

    def __init__(
        self,
        route: Route,
        limits: FrontLimits,
        error_body: ErrorBody,
        on_refused: Callable[[int], None] = lambda status: None,
        check_head: HeadCheck = lambda method, path, headers: None,
    ) -> None:
        self._route, self._limits, self._error_body = route, limits, error_body
        self.on_refused = on_refused  # told the status of each request refused before routing
        self.check_head = check_head
        self.conns: set[FrontConn] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.refused_total = 0  # connections answered 503 for being over max_connections
        self._refused_logged = 0
        self.draining = False  # shutting down: a connection closes once its answer is complete
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int, reuse_port: bool = False) -> int:
        """Listen; returns the port (useful with 0). `reuse_port`: share the port with the other
        workers (SO_REUSEPORT: the kernel spreads new connections over the listening sockets)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self.accept,
            host,
            port,
            backlog=1024,
            reuse_port=reuse_port or None,
        )
        self._sweeper = loop.create_task(self._sweep())
        return int(self._server.sockets[0].getsockname()[1])

    def accept(self) -> FrontConn:
        """A new client connection's protocol: the request path's first stage."""
        return FrontConn(self._route, self._limits, self._error_body, self)

    def refused(self) -> None:
        """Count a connection refused for being over the cap; log how many at most every 1,000th."""
        self.refused_total += 1
        if self.refused_total - self._refused_logged >= 1000 or self._refused_logged == 0:
            self._refused_logged = self.refused_total
            log.warning(
                "%d connections refused so far: %d open is gateway.max_connections",
                self.refused_total,
                self._limits.max_connections,
            )

    async def _sweep(self) -> None:
        """Close connections idle past the keep-alive limit or slow to send a head (one timer for all)."""
        loop, limit, head_limit = (
            asyncio.get_running_loop(),
            self._limits.keepalive_s,
            self._limits.head_timeout_s,
        )
        while True:
            await asyncio.sleep(min(limit / 4, head_limit / 4, 5.0))
            now = loop.time()
            for conn in list(self.conns):
                if conn.head_since is not None and now - conn.head_since > head_limit:
                    conn.head_timed_out()
                elif conn.idle_since is not None and now - conn.idle_since > limit:
                    conn.close()

    async def shutdown(self, drain_s: float = 0.0) -> None:
        """Stop listening; give requests in flight `drain_s` to finish (idle connections close at
        once, busy ones after their answer), then drop every connection and wait for the handlers."""
        if self._server is not None:
            self._server.close()
        if drain_s > 0 and self.tasks:
            self.draining = True
            for conn in list(self.conns):
                if conn.idle_since is not None:  # between requests: nothing to finish
                    conn.close()
            await asyncio.wait(set(self.tasks), timeout=drain_s)
        if self._sweeper is not None:
            self._sweeper.cancel()
        for conn in list(self.conns):
            conn.abort()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
