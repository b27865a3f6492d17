"""The limits every lanewatch uvicorn server runs with: connections, keep-alive, request-head time.

uvicorn caps concurrency (`limit_concurrency`: past it, requests get 503) and closes idle
keep-alive connections (`timeout_keep_alive`), but it has no timeout for a request head
that arrives slowly: a client sending one byte a second holds a connection, and a slot of
the cap, for as long as it likes. `HeadTimeoutProtocol` adds that timeout to uvicorn's
httptools protocol: a request head must be complete within `head_timeout_s` of the
connection opening (or, on a kept-alive connection, of the next request's first byte).
A connection that misses it gets `408 Request Timeout` (or nothing, if it sent nothing)
and is closed. `uvicorn_config` builds the `uvicorn.Config` of every service with them.

`read_limited` reads a request body with a size limit, for the collector's ASGI edges."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import uvicorn
from starlette.requests import Request
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

if TYPE_CHECKING:
    from lanewatch.collector.common.settings import ServerConfig

__all__ = [
    "HeadTimeoutProtocol",
    "ServeLimits",
    "head_timeout_protocol",
    "limits_of",
    "read_limited",
    "uvicorn_config",
]


log = logging.getLogger("lanewatch.http")

_TIMEOUT_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


@dataclass(frozen=True)
class ServeLimits:
    """Connection cap, idle keep-alive and request-head timeouts for one server."""

    max_connections: int = 256  # uvicorn's limit_concurrency: requests past it are answered 503
    keep_alive_s: int = 5  # an idle kept-alive connection is closed after this
    head_timeout_s: float = 10.0  # a request head must be complete within this


class HeadTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing connections whose request head is too slow."""

    head_timeout_s: ClassVar[float] = ServeLimits.head_timeout_s

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept the connection; its first request head is due within the timeout."""
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_started = False
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone: no timer may fire for it."""
        self._cancel_head_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        """The first byte of a request: on a kept-alive connection its head is now due."""
        self._head_started = True
        self._arm_head_timer()
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        """The head is whole; the request runs without a head deadline."""
        self._cancel_head_timer()
        self._head_started = False
        super().on_headers_complete()

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # a pipelined head stalled behind a response still being sent: finish that
            # response, then close instead of keeping the connection alive
            self.cycle.keep_alive = False
            return
        log.debug("closing %s: no complete request head within %.1f s", self.client, self.head_timeout_s)
        if self._head_started:
            self.transport.write(_TIMEOUT_408)
        self.transport.close()


def limits_of(server: ServerConfig) -> ServeLimits:
    """The limits a config's `server:` section sets."""
    return ServeLimits(server.max_connections, server.keep_alive_s, server.head_timeout_s)


def head_timeout_protocol(head_timeout_s: float) -> type[HeadTimeoutProtocol]:
    """A HeadTimeoutProtocol class with this timeout (uvicorn builds protocols from a class)."""
    if not head_timeout_s > 0:
        raise ValueError(f"head_timeout_s must be > 0, got {head_timeout_s}")
    return type("HeadTimeoutProtocol", (HeadTimeoutProtocol,), {"head_timeout_s": head_timeout_s})


def uvicorn_config(app: Any, limits: ServeLimits, **options: Any) -> uvicorn.Config:
    """A uvicorn.Config for `app` with `limits` applied; other Config options pass through."""
    return uvicorn.Config(
        app,
        http=head_timeout_protocol(limits.head_timeout_s),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=limits.keep_alive_s,
        **options,
    )


async def read_limited(request: Request, limit: int) -> bytes | None:
    """The request body, or None as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
