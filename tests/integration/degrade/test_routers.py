"""The envoy and nginx adapters against the real routers, two test upstreams behind them.

Shares are measured at the upstreams (the requests each one served). Every wait is bounded,
and the bounds are the behaviour promised: a shift takes hold within 2 s of the apply.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from lanewatch.collector.common.degrade_wire import LaneDegrade
from lanewatch.collector.degrade.adapters import Adapter, AdapterError, EnvoySettings, NginxSettings
from lanewatch.collector.degrade.metrics import DegradeMetrics
from lanewatch.collector.degrade.policy import DEFAULT_POLICY
from lanewatch.collector.degrade.service import DegradeService
from lanewatch.collector.degrade.store import Store
from tests.integration.gateway_harness import chat_body, read_events, upstream_server
from tests.sse_upstream import SseUpstream

from .routers import Router, running_envoy, running_nginx

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
KINDS = ["envoy", "nginx"]
SHIFTED = {"slow": LaneDegrade(shift_to="fast", shift_percent=100)}
BATCH = {"x-tenant-tier": "batch"}


def _router(
    kind: str, tmp_path: Path, ports: dict[str, int], **settings: Any
) -> AbstractContextManager[Router]:
    return (running_envoy if kind == "envoy" else running_nginx)(tmp_path, ports, **settings)


@asynccontextmanager
async def _lanes() -> AsyncIterator[tuple[dict[str, SseUpstream], dict[str, int]]]:
    async with AsyncExitStack() as stack:
        ups, ports = {}, {}
        for lane in ("fast", "slow"):
            up, url = await stack.enter_async_context(upstream_server(first_ms=1, gap_ms=1))
            ups[lane], ports[lane] = up, int(url.rsplit(":", 1)[1])
        yield ups, ports


@asynccontextmanager
async def _setup(
    kind: str, tmp_path: Path, **settings: Any
) -> AsyncIterator[tuple[dict[str, SseUpstream], Router, Adapter, aiohttp.ClientSession]]:
    # A new connection per request: an idle kept-alive connection that nginx's old worker closes
    # on reload can race a request sent on it (a client-side race of any reload, not a cut stream).
    connector = aiohttp.TCPConnector(force_close=True)
    async with _lanes() as (ups, ports), aiohttp.ClientSession(connector=connector) as s:
        with _router(kind, tmp_path, ports, **settings) as router:
            adapter = router.settings.build()
            try:
                yield ups, router, adapter, s
            finally:
                await adapter.shutdown()


async def _send(s: aiohttp.ClientSession, url: str, lane: str, headers: dict[str, str] | None = None) -> int:
    h = {"x-lanewatch-lane": lane, **(headers or {})}
    async with s.post(
        f"{url}/v1/chat/completions", json=chat_body(max_tokens=1, stream=False), headers=h
    ) as r:
        await r.read()
        return r.status


async def _share_at_fast(
    s: aiohttp.ClientSession, router: Router, ups: dict[str, SseUpstream], n: int
) -> float:
    """Send `n` slow-lane requests; the share the fast upstream served."""
    before = {lane: len(up.requests) for lane, up in ups.items()}
    statuses = await asyncio.gather(*(_send(s, router.url, "slow") for _ in range(n)))
    assert statuses == [200] * n
    served = {lane: len(up.requests) - before[lane] for lane, up in ups.items()}
    assert sum(served.values()) == n
    return served["fast"] / n


async def _moved_within(
    s: aiohttp.ClientSession, router: Router, ups: dict[str, SseUpstream], t0: float, target: float
) -> float:
    """Seconds from `t0` until a batch of slow-lane requests lands on fast at share `target` (±5%)."""
    while True:
        share = await _share_at_fast(s, router, ups, 10)
        if abs(share - target) <= 0.05:
            return time.monotonic() - t0
        assert time.monotonic() - t0 < 2.0, f"share at fast {share}, not {target}, 2 s after the apply"


async def _share_from(
    s: aiohttp.ClientSession, router: Router, ups: dict[str, SseUpstream], at: float, n: int = 40
) -> float:
    """The share at fast of `n` slow-lane requests sent from monotonic time `at` on.

    The promise is a share 2 s after a change, so the requests start then: an nginx worker
    of the old config may still take a connection or two in the moment after a reload.
    """
    await asyncio.sleep(max(0.0, at - time.monotonic()))  # the time the promise names, not a wait for state
    return await _share_at_fast(s, router, ups, n)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_shift_moves_the_slow_lane_within_2_s_and_a_restore_moves_it_back(
    kind: str, tmp_path: Path
) -> None:
    async with _setup(kind, tmp_path) as (ups, router, adapter, s):
        await adapter.apply({}, 1)
        assert await _share_at_fast(s, router, ups, 20) == 0.0
        t0 = time.monotonic()
        await adapter.apply(SHIFTED, 2)
        took = await _moved_within(s, router, ups, t0, 1.0)
        assert await _share_from(s, router, ups, t0 + 2.0) >= 0.95
        assert await _held(adapter) == SHIFTED
        t0 = time.monotonic()
        await adapter.apply({}, 3)
        back = await _moved_within(s, router, ups, t0, 0.0)
        assert await _share_from(s, router, ups, t0 + 2.0) <= 0.05
        assert await _held(adapter) == {}
        print(f"{kind}: shift took hold in {took:.2f} s, restore in {back:.2f} s")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_in_flight_across_the_change_completes_intact(kind: str, tmp_path: Path) -> None:
    async with _setup(kind, tmp_path) as (ups, router, adapter, s):
        await adapter.apply({}, 1)
        h = {"x-lanewatch-lane": "slow", "x-test-gap-ms": "50"}
        async with s.post(f"{router.url}/v1/chat/completions", json=chat_body(max_tokens=30), headers=h) as r:
            assert r.status == 200
            first = await r.content.readuntil(b"\n\n")
            t0 = time.monotonic()
            await adapter.apply(SHIFTED, 2)  # a route swap / a reload while the stream runs
            await _moved_within(s, router, ups, t0, 1.0)
            rest = b"".join([e for _, e in await read_events(r)])
        text = (first + rest).decode()
        assert all(f'"content":"t{i} "' in text for i in range(30)), text[-500:]
        assert text.rstrip().endswith("data: [DONE]")
        assert [
            up.last().finished for up in ups.values() if up.requests and up.last().body["max_tokens"] == 30
        ] == [True]


@pytest.mark.parametrize("kind", KINDS)
async def test_shed_gives_429_to_batch_only(kind: str, tmp_path: Path) -> None:
    async with _setup(kind, tmp_path) as (_ups, router, adapter, s):
        await adapter.apply({"fast": LaneDegrade(shed_classes=("batch",))}, 1)
        h = {"x-lanewatch-lane": "fast", **BATCH}
        async with s.post(f"{router.url}/v1/chat/completions", json=chat_body(stream=False), headers=h) as r:
            assert (r.status, r.headers["retry-after"]) == (429, "30")
            assert (await r.json())["error"]["code"] == 429
        assert await _send(s, router.url, "fast") == 200
        assert await _send(s, router.url, "fast", {"x-tenant-tier": "interactive"}) == 200
        # a client's own class hint decides nothing: the template's rule does
        assert await _send(s, router.url, "fast", {"x-lanewatch-class": "batch"}) == 200
        assert await _send(s, router.url, "slow", BATCH) == 200  # the slow lane sheds nothing
        assert await _held(adapter) == {"fast": LaneDegrade(shed_classes=("batch",))}
        await adapter.apply({}, 2)
        assert await _send(s, router.url, "fast", BATCH) == 200


async def _held(adapter: Adapter) -> dict[str, LaneDegrade]:
    view = await adapter.read_back()
    assert view is not None
    return view.lanes


def _failures(metrics: DegradeMetrics, name: str) -> float:
    value = metrics.registry.get_sample_value("lanewatch_degrade_adapter_failures_total", {"adapter": name})
    return float(value or 0)


async def _reconcile_once(tmp_path: Path, adapter: Adapter) -> tuple[bool, DegradeMetrics, Store]:
    store = Store(tmp_path / "state")
    metrics = DegradeMetrics(CollectorRegistry(), [adapter.name])
    ok = await DegradeService(DEFAULT_POLICY, store, [adapter], metrics).reconcile()
    return ok, metrics, store


@pytest.mark.parametrize("validate", [True, False])
async def test_envoy_routes_that_do_not_validate_leave_the_running_config(
    validate: bool, tmp_path: Path
) -> None:
    async with _setup("envoy", tmp_path, validate_with_envoy=validate) as (ups, router, adapter, s):
        settings = router.settings
        assert isinstance(settings, EnvoySettings)
        await adapter.apply(SHIFTED, 1)
        good = settings.route_file.read_text()
        template = settings.route_template
        bad_route = "        - match: {safe_regex: {regex: '('}}\n          route: {cluster: fast}\n"
        template.write_text(template.read_text().replace("      routes:\n", "      routes:\n" + bad_route, 1))
        with pytest.raises(AdapterError) as caught:
            await adapter.apply({}, 2)
        reason = "do not validate (envoy --mode validate)" if validate else "update_rejected"
        assert reason in str(caught.value) and not caught.value.retryable
        assert settings.route_file.read_text() == good
        assert await _share_at_fast(s, router, ups, 20) == 1.0  # Envoy still holds the shift
        ok, metrics, store = await _reconcile_once(tmp_path, adapter)
        assert not ok and _failures(metrics, adapter.name) == 1
        [(_seq, _rev, entry)] = [e for e in store.recent(10) if e[2].event == "adapter_failed"]
        assert reason in entry.detail["error"]


async def test_an_nginx_include_the_check_refuses_is_put_back_and_not_reloaded(tmp_path: Path) -> None:
    async with _setup("nginx", tmp_path) as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        assert isinstance(router.settings, NginxSettings)
        include = router.settings.include_file
        good = include.read_text()
        broken = router.settings.model_copy(update={"lane_variable": "$no_such_variable"}).build()
        with pytest.raises(AdapterError, match="refused the rendered include") as caught:
            await broken.apply({}, 2)
        assert "no_such_variable" in str(caught.value) and "previous include is back" in str(caught.value)
        assert include.read_text() == good
        assert await _share_at_fast(s, router, ups, 20) == 1.0  # nginx still holds the shift
        ok, metrics, _store = await _reconcile_once(tmp_path, broken)
        assert not ok and _failures(metrics, broken.name) == 1
        assert include.read_text() == good
