"""The prober's connections: DNS, TCP connect and TLS timed apart, kept alive per target.

A probe runs on `UpstreamConn` (collector/http1/client.py), the gateway's bare-asyncio
HTTP/1.1 connection: each read's payload reaches the prober in the read's own callback, so a
streamed answer costs one callback per read and no task switch, where httpcore took a
coroutine hop through h11, anyio and two generator layers per read (measured in bench/).
Name resolution and the TCP handshake are timed apart (a library's connect covers both);
TLS gets the target's host name for SNI and certificate checks.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from lanewatch.collector.common.errors import UpstreamError
from lanewatch.collector.http1.client import IdleConnections, UpstreamConn

__all__ = [
    "ConnectTimes",
    "Connector",
    "DnsError",
    "ProbeConnections",
    "Resolver",
    "open_socket",
    "ssl_context",
    "system_resolve",
]

Resolver = Callable[[str, int], Awaitable[list[str]]]
Connector = Callable[[str, int], Awaitable[socket.socket]]  # a literal address → a connected socket
KEEP_IDLE_S = 30.0  # an idle connection is reused this long, unless the server closed it first


@dataclass(slots=True)
class ConnectTimes:
    """Stamps and durations of one new connection (perf_counter; None: not reached)."""

    started: float | None = None  # before name resolution
    dns_s: float = 0.0
    connect_s: float = 0.0
    tls_started: float | None = None
    tls_ended: float | None = None
    address: str | None = None  # the address connected to
    phase: Literal["connect", "tls", "ready"] = "connect"
    resolving: bool = False  # True while name resolution runs (for failure attribution)


class DnsError(UpstreamError, OSError):
    """The host name did not resolve (or resolution ran past the connect timeout)."""


async def system_resolve(host: str, port: int) -> list[str]:
    """Addresses for host, in the system resolver's order (getaddrinfo)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def open_socket(address: str, port: int) -> socket.socket:
    """A TCP socket connected to a literal address, Nagle off (small requests leave at once)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.get_running_loop().sock_connect(sock, (address, port))
    except BaseException:
        sock.close()
        raise
    return sock


class ProbeConnections:
    """Connections to one target: opened timed, and with `warm` kept for the next probe."""

    def __init__(
        self,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        *,
        connection: Literal["warm", "cold"] = "warm",
        max_idle: int = 4,
        resolve: Resolver | None = None,
        connect: Connector | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host, self.port, self.tls = host, port, tls
        self._key = (host, port, tls is not None)
        self._keep = connection == "warm"
        self._max_idle = max_idle
        self._resolve = resolve or system_resolve
        self._connect = connect or open_socket
        self._idle = IdleConnections(KEEP_IDLE_S, clock)

    def take_idle(self) -> UpstreamConn | None:
        """A kept-alive connection the server has not closed, or None; never waits."""
        return self._idle.take(self._key)

    async def open(self, times: ConnectTimes) -> UpstreamConn:
        """A new connection: resolve (timed), connect to each address in turn (timed), TLS.

        The caller bounds the whole with its own timeout; `times.phase` says where it was."""
        times.started = time.perf_counter()
        addresses = await self._addresses(times)
        resolved = time.perf_counter()
        times.dns_s = resolved - times.started if addresses != [self.host] else 0.0
        sock, last = None, None
        for address in addresses:
            began = time.perf_counter()
            try:
                sock = await self._connect(address, self.port)
            except OSError as exc:  # refused or unreachable: try the next address
                last = exc
                continue
            times.connect_s, times.address = time.perf_counter() - began, address
            break
        if sock is None:
            raise last or OSError(f"no address for {self.host}")
        loop = asyncio.get_running_loop()
        conn = UpstreamConn(self._key)
        try:
            transport, _ = await loop.create_connection(lambda: conn, sock=sock)
        except BaseException:
            sock.close()
            raise
        if conn.transport is None:  # uvloop calls connection_made a loop turn after connecting
            conn.transport = transport
        if self.tls is not None:
            times.phase, times.tls_started = "tls", time.perf_counter()
            try:
                tls_transport = await loop.start_tls(transport, conn, self.tls, server_hostname=self.host)
            except BaseException:
                transport.abort()
                raise
            assert tls_transport is not None
            conn.transport = tls_transport
            times.tls_ended = time.perf_counter()
        times.phase = "ready"
        return conn

    def release(self, conn: UpstreamConn) -> None:
        """Keep `conn` for the next probe when warm and it can carry one, else close it."""
        if self._keep:
            self._idle.keep(conn, self._max_idle)
        else:
            conn.abort()

    def close(self) -> None:
        """Close every idle connection."""
        self._idle.close()

    async def _addresses(self, times: ConnectTimes) -> list[str]:
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            pass
        else:
            return [self.host]  # a literal address: nothing to resolve
        times.resolving = True  # left set when it fails or times out: the failure is DNS's
        try:
            addresses = await self._resolve(self.host, self.port)
        except OSError as exc:
            raise DnsError(f"{self.host} did not resolve: {exc}") from exc
        times.resolving = False
        if not addresses:
            raise DnsError(f"{self.host} resolved to no address")
        return addresses


def ssl_context(cacert: Path | None = None, insecure: bool = False) -> ssl.SSLContext:
    """A client TLS context: the given CA bundle, httpx's default trust, or no checks (-k)."""
    if insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if cacert is not None:
        return ssl.create_default_context(cafile=str(cacert))
    return httpx.create_ssl_context()
