"""The upstream leg's phases, from aiohttp's TraceConfig signals (per request, never per chunk).

aiohttp reports DNS and connection creation but not the TLS handshake apart from TCP:
`connect_s` therefore holds TCP + TLS and `tls_s` stays unmeasured (None) on the tap.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter
from types import SimpleNamespace
from typing import Any

import aiohttp

__all__ = ["LegTimes", "leg_trace_config"]


@dataclass(slots=True)
class LegTimes:
    """perf_counter() stamps of one upstream request's milestones."""

    start: float = 0.0
    dns_start: float | None = None
    dns_end: float | None = None
    conn_start: float | None = None
    conn_end: float | None = None
    reused: bool = False
    sent: float | None = None  # request headers (and body) written
    headers: float | None = None  # response headers received

    @property
    def dns_s(self) -> float | None:
        """Name resolution; 0 on a reused connection or an IP literal."""
        if self.reused:
            return 0.0
        if self.dns_start is not None and self.dns_end is not None:
            return self.dns_end - self.dns_start
        return 0.0 if self.conn_end is not None else None

    @property
    def connect_s(self) -> float | None:
        """TCP (+ TLS) connection set-up without DNS; 0 on a reused connection."""
        if self.reused:
            return 0.0
        if self.conn_start is None or self.conn_end is None:
            return None
        return max(self.conn_end - self.conn_start - (self.dns_s or 0.0), 0.0)

    @property
    def send_s(self) -> float | None:
        """From the connection being ready to the request written."""
        if self.sent is None:
            return None
        ready = self.conn_end if (self.conn_end is not None and not self.reused) else self.start
        return max(self.sent - ready, 0.0)


def _leg(ctx: SimpleNamespace) -> LegTimes:
    leg: LegTimes = ctx.trace_request_ctx
    return leg


async def _on_conn_create_start(_s: Any, ctx: SimpleNamespace, _p: Any) -> None:
    _leg(ctx).conn_start = perf_counter()


async def _on_conn_create_end(_s: Any, ctx: SimpleNamespace, _p: Any) -> None:
    _leg(ctx).conn_end = perf_counter()


async def _on_conn_reuse(_s: Any, ctx: SimpleNamespace, _p: Any) -> None:
    _leg(ctx).reused = True


async def _on_dns_start(_s: Any, ctx: SimpleNamespace, _p: Any) -> None:
    _leg(ctx).dns_start = perf_counter()


async def _on_dns_end(_s: Any, ctx: SimpleNamespace, _p: Any) -> None:
    _leg(ctx).dns_end = perf_counter()


async def _on_sent(_s: Any, ctx: SimpleNamespace, _p: Any) -> None:
    _leg(ctx).sent = perf_counter()


async def _on_end(_s: Any, ctx: SimpleNamespace, _p: Any) -> None:
    _leg(ctx).headers = perf_counter()


def leg_trace_config() -> aiohttp.TraceConfig:
    """A TraceConfig that stamps a LegTimes passed as `trace_request_ctx`."""
    tc = aiohttp.TraceConfig()
    tc.on_connection_create_start.append(_on_conn_create_start)
    tc.on_connection_create_end.append(_on_conn_create_end)
    tc.on_connection_reuseconn.append(_on_conn_reuse)
    tc.on_dns_resolvehost_start.append(_on_dns_start)
    tc.on_dns_resolvehost_end.append(_on_dns_end)
    tc.on_request_headers_sent.append(_on_sent)
    tc.on_request_chunk_sent.append(_on_sent)
    tc.on_request_end.append(_on_end)
    tc.freeze()
    return tc
