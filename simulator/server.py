"""Serves the simulator with uvicorn: plain HTTP or TLS, the refused-connections fault and the
slow-handshake fault.

The event loop is asyncio's own (not uvloop): its timers never fire early, which keeps the
engine's steps and the streams' timing honest. HTTP parsing is httptools.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from asyncio.sslproto import SSLProtocol
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from .app import Simulator, create_app
from .lifecycle import StreamTruncated


@dataclass(frozen=True)
class ServeOptions:
    """Where and how to listen."""

    host: str = "127.0.0.1"
    port: int = 8000
    certfile: Path | None = None
    keyfile: Path | None = None
    log_level: str = "warning"


class _DropTruncation(logging.Filter):
    """The truncation fault ends a stream by raising; that is not an error worth a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, StreamTruncated)


class Listener:
    """Stops listening for a while (new connections refused) and listens again on the same port."""

    def __init__(self, server: uvicorn.Server, config: uvicorn.Config, opts: ServeOptions) -> None:
        self.server = server
        self.config = config
        self.opts = opts
        self._reopen: asyncio.TimerHandle | None = None

    def refuse(self, seconds: float) -> None:
        """Close the listening sockets now and reopen them after `seconds`."""
        loop = asyncio.get_running_loop()
        if self._reopen is not None:
            self._reopen.cancel()
        else:
            for srv in self.server.servers:
                srv.close()
        self._reopen = loop.call_later(seconds, lambda: loop.create_task(self._listen()))

    async def _listen(self) -> None:
        self._reopen = None
        loop = asyncio.get_running_loop()
        family = socket.AF_INET6 if ":" in self.opts.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.opts.host, self.opts.port))
        cfg, server = self.config, self.server

        def protocol() -> asyncio.Protocol:
            # The same protocol uvicorn's own listener builds (uvicorn.server.Server.startup).
            return cfg.http_protocol_class(  # type: ignore[call-arg]
                config=cfg, server_state=server.server_state, app_state=server.lifespan.state
            )

        srv = await loop.create_server(protocol, sock=sock, ssl=cfg.ssl, backlog=cfg.backlog)
        server.servers.append(srv)


HANDSHAKE_TIMEOUT_S = 60  # asyncio's own default for a TLS server


def delayed_tls_protocol(
    inner: Callable[..., asyncio.Protocol], context: ssl.SSLContext, delay_s: Callable[[], float]
) -> type[asyncio.Protocol]:
    """A protocol class that does TLS itself, starting each handshake `delay_s()` late.

    The listening server runs without `ssl=`; each connection first gets this gatekeeper, which
    stops reading (the ClientHello waits in the kernel), then hands the connection to asyncio's
    own TLS protocol wrapping uvicorn's HTTP protocol, exactly as `create_server(ssl=...)` does.
    """

    class DelayedTls(asyncio.Protocol):
        def __init__(self, **kwargs: Any) -> None:
            self._kwargs = kwargs  # what uvicorn builds its HTTP protocol with
            self._timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            delay = delay_s()
            if delay <= 0:
                self._start(transport)
                return
            transport.pause_reading()
            self._timer = asyncio.get_running_loop().call_later(delay, self._start, transport)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._timer is not None:
                self._timer.cancel()

        def _start(self, transport: asyncio.Transport) -> None:
            self._timer = None
            if transport.is_closing():
                return
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()
            # a failed handshake sets its exception here; retrieve it (the connection is closed anyway)
            waiter.add_done_callback(lambda f: f.cancelled() or f.exception())
            app = inner(**self._kwargs)
            tls = SSLProtocol(
                loop, app, context, waiter, server_side=True, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S
            )
            transport.set_protocol(tls)
            tls.connection_made(transport)
            transport.resume_reading()

    return DelayedTls


def build_server(
    sim: Simulator, opts: ServeOptions, *, make_config: Callable[..., uvicorn.Config]
) -> uvicorn.Server:
    """A uvicorn server for `sim`, its config loaded (TLS key read) and refusal wired.

    `make_config` builds the uvicorn.Config from these options; the command line passes one
    that adds the connection cap, keep-alive and request-head timeouts every lanewatch
    server has (this package imports nothing of lanewatch, so it cannot pick them itself).
    """
    config = make_config(
        create_app(sim),
        host=opts.host,
        port=opts.port,
        loop="asyncio",
        lifespan="on",
        access_log=False,
        log_level=opts.log_level,
        ssl_certfile=str(opts.certfile) if opts.certfile else None,
        ssl_keyfile=str(opts.keyfile) if opts.keyfile else None,
        timeout_graceful_shutdown=2,  # streams still open then are cut, not waited for
    )
    config.load()
    if config.ssl is not None:
        # TLS moves into the protocol so that the slow-handshake fault can hold it back
        delay = lambda: sim.faults.spec.tls_handshake_delay_s  # noqa: E731
        config.http_protocol_class = delayed_tls_protocol(config.http_protocol_class, config.ssl, delay)
        config.ssl = None
    logging.getLogger("uvicorn.error").addFilter(_DropTruncation())
    server = uvicorn.Server(config)
    sim.on_refuse = Listener(server, config, opts).refuse
    return server
