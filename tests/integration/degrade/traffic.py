"""Traffic through a router under test: two test upstreams, requests by lane, shares at the upstreams."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from lanewatch.collector.degrade.adapters import Adapter
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.integration.gateway_harness import chat_body, upstream_server
from tests.sse_upstream import SseUpstream

from .routers import Router, running_envoy, running_nginx

__all__ = ["BATCH", "KINDS", "SHIFTED", "moved_within", "router_setup", "send", "share_at_fast", "share_from"]

KINDS = ["envoy", "nginx"]
SHIFTED = {"slow": LaneDegrade(shift_to="fast", shift_percent=100)}
BATCH = {"x-tenant-tier": "batch"}


def router_for(
    kind: str, tmp_path: Path, ports: dict[str, int], **settings: Any
) -> AbstractContextManager[Router]:
    return (running_envoy if kind == "envoy" else running_nginx)(tmp_path, ports, **settings)


@asynccontextmanager
async def two_lanes() -> AsyncIterator[tuple[dict[str, SseUpstream], dict[str, int]]]:
    async with AsyncExitStack() as stack:
        ups, ports = {}, {}
        for lane in ("fast", "slow"):
            up, url = await stack.enter_async_context(upstream_server(first_ms=1, gap_ms=1))
            ups[lane], ports[lane] = up, int(url.rsplit(":", 1)[1])
        yield ups, ports


@asynccontextmanager
async def router_setup(
    kind: str, tmp_path: Path, **settings: Any
) -> AsyncIterator[tuple[dict[str, SseUpstream], Router, Adapter, aiohttp.ClientSession]]:
    # A new connection per request: an idle kept-alive connection that nginx's old worker closes
    # on reload can race a request sent on it (a client-side race of any reload, not a cut stream).
    connector = aiohttp.TCPConnector(force_close=True)
    async with two_lanes() as (ups, ports), aiohttp.ClientSession(connector=connector) as s:
        with router_for(kind, tmp_path, ports, **settings) as router:
            adapter = router.settings.build()
            try:
                yield ups, router, adapter, s
            finally:
                await adapter.shutdown()


async def send(s: aiohttp.ClientSession, url: str, lane: str, headers: dict[str, str] | None = None) -> int:
    h = {"x-lanewatch-lane": lane, **(headers or {})}
    async with s.post(
        f"{url}/v1/chat/completions", json=chat_body(max_tokens=1, stream=False), headers=h
    ) as r:
        await r.read()
        return r.status


async def share_at_fast(
    s: aiohttp.ClientSession, router: Router, ups: dict[str, SseUpstream], n: int
) -> float:
    """Send `n` slow-lane requests; the share the fast upstream served."""
    before = {lane: len(up.requests) for lane, up in ups.items()}
    statuses = await asyncio.gather(*(send(s, router.url, "slow") for _ in range(n)))
    assert statuses == [200] * n
    served = {lane: len(up.requests) - before[lane] for lane, up in ups.items()}
    assert sum(served.values()) == n
    return served["fast"] / n


async def moved_within(
    s: aiohttp.ClientSession, router: Router, ups: dict[str, SseUpstream], t0: float, target: float
) -> float:
    """Seconds from `t0` until a batch of slow-lane requests lands on fast at share `target` (±5%)."""
    while True:
        share = await share_at_fast(s, router, ups, 10)
        if abs(share - target) <= 0.05:
            return time.monotonic() - t0
        assert time.monotonic() - t0 < 2.0, f"share at fast {share}, not {target}, 2 s after the apply"


async def share_from(
    s: aiohttp.ClientSession, router: Router, ups: dict[str, SseUpstream], at: float, n: int = 40
) -> float:
    """The share at fast of `n` slow-lane requests sent from monotonic time `at` on.

    The promise is a share 2 s after a change, so the requests start then: an nginx worker
    of the old config may still take a connection or two in the moment after a reload.
    """
    await asyncio.sleep(max(0.0, at - time.monotonic()))  # the time the promise names, not a wait for state
    return await share_at_fast(s, router, ups, n)
