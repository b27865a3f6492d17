"""The prober's connection layer: DNS and TCP connect timed apart, under an httpcore pool.

httpcore's `connection.connect_tcp` trace event covers name resolution and the TCP
handshake together. `TimedBackend` resolves the name itself (timed), then connects to
the resolved address (timed); TLS still gets the request's host name for SNI and
certificate checks, because httpcore passes `server_hostname` from the URL. The times
land in the `ConnectTimes` that the calling task installed with `capture_connect_times`
(httpcore opens a connection inside the task whose request needs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import httpcore
import httpx
from httpcore._backends.anyio import AnyIOStream  # httpcore's stream over anyio (pinned <2)

Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass(slots=True)
class ConnectTimes:
    """Durations of one new connection's name resolution and TCP handshake."""

    dns_s: float = 0.0
    connect_s: float = 0.0
    address: str | None = None  # the address connected to
    resolving: bool = False  # True while name resolution runs (for failure attribution)


class DnsError(httpcore.ConnectError):
    """The host name did not resolve (or resolution ran past the connect timeout)."""


_CURRENT: ContextVar[ConnectTimes | None] = ContextVar("lanewatch_connect_times", default=None)


@contextlib.contextmanager
def capture_connect_times(times: ConnectTimes) -> Iterator[ConnectTimes]:
    """Record connections opened by this task's requests into `times`."""
    token = _CURRENT.set(times)
    try:
        yield times
    finally:
        _CURRENT.reset(token)


async def system_resolve(host: str, port: int) -> list[str]:
    """Addresses for host, in the system resolver's order (getaddrinfo)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class TimedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that times DNS and TCP connect separately.

    By default it connects with the event loop's own `sock_connect`, so the connect time
    is the handshake and not a library's bookkeeping; `inner` delegates instead (tests).
    """

    def __init__(self, inner: httpcore.AsyncNetworkBackend | None = None, resolve: Resolver | None = None):
        self._inner = inner
        self._resolve = resolve or system_resolve

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve host (timed), then connect to its addresses in order (timed)."""
        times = _CURRENT.get() or ConnectTimes()
        start = time.perf_counter()
        deadline = None if timeout is None else start + timeout
        addresses = await self._addresses(host, port, timeout, times)
        times.dns_s = time.perf_counter() - start if addresses != [host] else 0.0
        last: Exception | None = None
        for address in addresses:
            left = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
            try:
                stream, times.connect_s = await self._connect(
                    address, port, left, local_address, socket_options
                )
            except httpcore.ConnectError as exc:  # refused or unreachable: try the next address
                last = exc
                continue
            times.address = address
            return stream
        raise last or httpcore.ConnectError(f"no address for {host}")

    async def _connect(
        self,
        address: str,
        port: int,
        limit_s: float | None,
        local_address: str | None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None,
    ) -> tuple[httpcore.AsyncNetworkStream, float]:
        if self._inner is None:
            return await open_tcp(address, port, limit_s, local_address, socket_options)
        start = time.perf_counter()
        stream = await self._inner.connect_tcp(
            address, port, timeout=limit_s, local_address=local_address, socket_options=socket_options
        )
        return stream, time.perf_counter() - start

    async def _addresses(self, host: str, port: int, limit_s: float | None, times: ConnectTimes) -> list[str]:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            return [host]  # a literal address: nothing to resolve
        times.resolving = True
        try:
            with anyio.fail_after(limit_s):
                addresses = await self._resolve(host, port)
        except TimeoutError:
            raise DnsError(f"resolving {host} timed out") from None
        except OSError as exc:
            raise DnsError(f"{host} did not resolve: {exc}") from exc
        finally:
            times.resolving = False
        if not addresses:
            raise DnsError(f"{host} resolved to no address")
        return addresses

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Unix sockets have no DNS or TCP handshake to time."""
        inner = self._inner or httpcore.AnyIOBackend()
        return await inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)

    async def sleep(self, seconds: float) -> None:
        """Sleep (httpcore's retry backoff)."""
        await anyio.sleep(seconds)


async def open_tcp(
    address: str,
    port: int,
    limit_s: float | None = None,
    local_address: str | None = None,
    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
) -> tuple[httpcore.AsyncNetworkStream, float]:
    """Connect to a literal address; return the stream and the handshake's duration."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as anyio and asyncio do
        for option in socket_options or ():
            sock.setsockopt(*option)
        if local_address:
            sock.bind((local_address, 0))
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        try:
            async with asyncio.timeout(limit_s):
                await loop.sock_connect(sock, (address, port))
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connecting to {address} port {port} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"connecting to {address} port {port}: {exc}") from exc
        elapsed = time.perf_counter() - start
        stream = await anyio.abc.SocketStream.from_socket(sock)
    except BaseException:
        sock.close()
        raise
    return AnyIOStream(stream), elapsed


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


def build_pool(
    *,
    connection: Literal["warm", "cold"] = "warm",
    tls: ssl.SSLContext | None = None,
    max_connections: int = 4,
    backend: httpcore.AsyncNetworkBackend | None = None,
) -> httpcore.AsyncConnectionPool:
    """A connection pool whose connections are timed; `cold` keeps no idle connection.

    The prober sends through httpcore itself: httpx's client would add a request model, a
    response model and three more generator layers to every read of the stream, and it
    gives the prober nothing it needs (no redirects, no auth, no decoding of the body).
    """
    return httpcore.AsyncConnectionPool(
        ssl_context=tls,
        max_connections=max_connections,
        max_keepalive_connections=0 if connection == "cold" else max_connections,
        keepalive_expiry=30.0,
        http1=True,
        http2=False,
        network_backend=backend or TimedBackend(),
    )
