"""A model two lanes list stays with the lane that owns it: real test upstreams, a gateway on 127.0.0.1.

The default lane (fast) is a multi-model engine whose `/v1/models` also comes to list the slow
lane's model. Requests naming that model must still go to slow (declared there, or listed
there first), and the collision is logged and counted once, not on every refresh.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.exporters import names
from lanewatch.exporters.gateway import GatewayCollector
from tests.servers import serve_app
from tests.sse_upstream import SseUpstream
from tests.waiting import eventually_async

from .gateway_harness import RunningGateway, chat_body, gateway_server, upstream_server

pytestmark = pytest.mark.integration
ROUTING: dict[str, Any] = {"lane_order": ["fast", "slow"], "default_lane": "fast"}


class ListingUpstream(SseUpstream):
    """The test upstream with a `/v1/models` list the test changes, counting how often it is asked."""

    def __init__(self, listed: list[str], **kw: Any) -> None:
        super().__init__(**kw)
        self.listed = listed
        self.asked = 0

    async def _models(self, _r: web.Request) -> web.Response:
        self.asked += 1
        data = [{"id": m, "object": "model"} for m in self.listed]
        return web.json_response({"object": "list", "data": data})


@asynccontextmanager
async def _serve(up: SseUpstream) -> AsyncIterator[str]:
    """`upstream_server`, for an upstream the test built; yields its URL."""
    runner, url = await serve_app(up.app, handler_cancellation=True)
    try:
        yield url
    finally:
        await runner.cleanup()


async def _lane_for(s: aiohttp.ClientSession, g: RunningGateway, model: str) -> tuple[int, str, str]:
    async with s.post(f"{g.url}/v1/chat/completions", json={**chat_body(), "model": model}) as r:
        await r.read()
        return r.status, r.headers["x-lanewatch-lane"], r.headers["x-lanewatch-model"]


async def _collisions(s: aiohttp.ClientSession, g: RunningGateway) -> dict[str, float]:
    async with s.get(f"{g.url}/metrics") as r:
        text = await r.text()
    return {
        sample.labels["lane"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == names.GATEWAY_MODEL_COLLISIONS_TOTAL
    }


def _with_metrics(g: RunningGateway) -> RunningGateway:
    """The gateway's /metrics on, with its own collector, as `lanewatch gateway` wires it."""
    registry = CollectorRegistry()
    registry.register(GatewayCollector(g.gw.stats))
    g.gw.metrics_text = lambda: (generate_latest(registry), CONTENT_TYPE_LATEST)
    return g


def _collision_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "is listed by lane" in r.getMessage()]


async def test_the_slow_lanes_model_stays_on_slow_when_the_default_lane_starts_listing_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="lanewatch.gateway")
    fast_up = ListingUpstream(["small"], first_ms=1, gap_ms=1, model="small")
    async with (
        upstream_server(first_ms=1, gap_ms=1, model="big") as (slow_up, slow_url),
        _serve(fast_up) as fast_url,
        gateway_server(
            {"fast": [fast_url], "slow": [slow_url]}, model_discovery={"interval_s": 0.1}, **ROUTING
        ) as g,
        aiohttp.ClientSession() as s,
    ):
        _with_metrics(g)
        assert await _lane_for(s, g, "big") == (200, "slow", "big -> big")  # learned at start
        fast_up.listed = ["small", "big"]  # the default lane's engine loads the slow lane's model
        await eventually_async(
            lambda: g.gw.models.served.get("fast") == ("small", "big"), 10, "fast lists big"
        )
        asked = fast_up.asked
        for _ in range(5):
            assert await _lane_for(s, g, "big") == (200, "slow", "big -> big")
        assert await _lane_for(s, g, "small") == (200, "fast", "small -> small")
        await eventually_async(lambda: fast_up.asked >= asked + 3, 10, "three more refreshes")
        assert await _collisions(s, g) == {"fast": 1.0}  # once, not once a refresh
        assert len(_collision_logs(caplog)) == 1
        assert "lane slow owns it (listed it first)" in _collision_logs(caplog)[0]
        assert sum(1 for r in slow_up.requests.values() if r.body["model"] == "big") == 6
        assert all(r.body["model"] == "small" for r in fast_up.requests.values())


async def test_a_model_declared_for_the_slow_lane_stays_there_whatever_the_default_lane_lists(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="lanewatch.gateway")
    fast_up = ListingUpstream(["small", "big"], first_ms=1, gap_ms=1, model="small")
    async with (
        upstream_server(first_ms=1, gap_ms=1, model="big") as (_slow_up, slow_url),
        _serve(fast_up) as fast_url,
        gateway_server(
            {"fast": [fast_url], "slow": {"upstreams": [slow_url], "models": ["big"]}}, **ROUTING
        ) as g,
        aiohttp.ClientSession() as s,
    ):
        _with_metrics(g)
        assert await _lane_for(s, g, "big") == (200, "slow", "big -> big")
        assert await _collisions(s, g) == {"fast": 1.0}
        assert "lane slow owns it (declares it)" in _collision_logs(caplog)[0]
