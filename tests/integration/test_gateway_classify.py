"""Shedding acts on the operator's classes: no header left out, forged or pointed at the fast lane
lets a batch request through while batch is shed on the slow lane. Real gateway on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from .gateway_harness import TRUST_LOOPBACK, RunningGateway, chat_body, gateway_server, upstream_server

pytestmark = pytest.mark.integration
CHAT = "/v1/chat/completions"
SHED_BATCH_ON_SLOW = {"lanes": {"slow": {"shed_classes": ["batch"]}}}


async def _post(s: aiohttp.ClientSession, g: RunningGateway, body: dict[str, Any], **headers: str) -> int:
    async with s.post(g.url + CHAT, json=body, headers=headers) as r:
        await r.read()
        return r.status


async def test_a_batch_request_is_shed_with_or_without_headers_when_hints_are_untrusted() -> None:
    batch = chat_body(max_tokens=2048)  # the default rules: 1024 tokens or more is batch
    async with (
        upstream_server(first_ms=1, gap_ms=0) as (fast, fast_url),
        upstream_server(first_ms=1, gap_ms=0) as (slow, slow_url),
        gateway_server({"fast": [fast_url], "slow": [slow_url]}, admin_insecure=True) as g,
        aiohttp.ClientSession() as s,
    ):
        async with s.put(f"{g.url}/admin/degrade", json=SHED_BATCH_ON_SLOW) as r:
            assert r.status == 200
        assert await _post(s, g, batch) == 429  # no header: the rules say batch
        assert await _post(s, g, batch, **{"x-lanewatch-class": "interactive"}) == 429
        assert await _post(s, g, batch, **{"x-lanewatch-class": "batch", "x-lanewatch-lane": "fast"}) == 429
        assert await _post(s, g, batch, **{"x-lanewatch-lane": "fast"}) == 429
        # a short answer is interactive whatever the header says, and served
        assert await _post(s, g, chat_body(max_tokens=4), **{"x-lanewatch-class": "batch"}) == 200
    assert not fast.requests  # nothing escaped to the fast lane
    assert len(slow.requests) == 1
    assert [r.request_class for r in g.records] == ["interactive"]
    assert g.gw.stats.shed[("slow", "batch")] == 4


async def test_a_trusted_client_names_its_class_and_lane_within_the_gateway_classes(tmp_path: Path) -> None:
    token = tmp_path / "hint.token"
    token.write_text("hint-tok\n")
    hints = {"token_file": str(token)}
    async with (
        upstream_server(first_ms=1, gap_ms=0) as (fast, fast_url),
        upstream_server(first_ms=1, gap_ms=0) as (_slow, slow_url),
        gateway_server({"fast": [fast_url], "slow": [slow_url]}, admin_insecure=True, hints=hints) as g,
        aiohttp.ClientSession() as s,
    ):
        async with s.put(f"{g.url}/admin/degrade", json=SHED_BATCH_ON_SLOW) as r:
            assert r.status == 200
        trusted = {"authorization": "Bearer hint-tok"}
        assert await _post(s, g, chat_body(), **trusted, **{"x-lanewatch-class": "batch"}) == 429
        assert await _post(s, g, chat_body(), **trusted, **{"x-lanewatch-lane": "fast"}) == 200
        assert await _post(s, g, chat_body(), **trusted, **{"x-lanewatch-class": "sq7"}) == 200
        assert await _post(s, g, chat_body(), **{"x-lanewatch-lane": "fast"}) == 200  # no token: slow
    assert [(r.lane, r.request_class) for r in g.records] == [
        ("fast", "interactive"),
        ("slow", "other"),
        ("slow", "interactive"),
    ]
    assert len(fast.requests) == 1


async def test_loopback_trusted_by_network() -> None:
    async with (
        upstream_server(first_ms=1, gap_ms=0) as (fast, fast_url),
        upstream_server(first_ms=1, gap_ms=0) as (_slow, slow_url),
        gateway_server({"fast": [fast_url], "slow": [slow_url]}, hints=TRUST_LOOPBACK) as g,
        aiohttp.ClientSession() as s,
    ):
        assert await _post(s, g, chat_body(), **{"x-lanewatch-lane": "fast"}) == 200
    assert [r.lane for r in g.records] == ["fast"] and len(fast.requests) == 1
