"""Learning a lane's models from its upstreams' /v1/models: the parse, the bookkeeping, the bounded fetch."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from lanewatch.collector.gateway import Gateway
from lanewatch.collector.gateway.admission.model_discovery import (
    DiscoveryError,
    ModelLearner,
    fetch_models,
    parse_models,
    refresh_safely,
    run_discovery,
)
from lanewatch.collector.gateway.settings import GatewayConfig
from tests.servers import serve_app


def _listing(*ids: Any) -> bytes:
    return json.dumps({"object": "list", "data": [{"id": i, "object": "model"} for i in ids]}).encode()


def test_parse_keeps_the_ids_in_order_once_each_and_at_most_the_cap() -> None:
    assert parse_models(_listing("big", "lora-a", "big"), 32) == ("big", "lora-a")
    assert parse_models(_listing(*(f"m{i}" for i in range(50))), 3) == ("m0", "m1", "m2")


def test_parse_skips_ids_no_label_or_header_can_carry() -> None:
    body = _listing("", " padded ", "x" * 257, "bad\nline", 7, None, "ok")
    assert parse_models(body, 32) == ("ok",)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html>", "not JSON"),
        (b"[" * 100_000, "not JSON"),
        (b'{"data": {}}', "no 'data' list"),
        (b"[]", "no 'data' list"),
        (_listing(), "no usable model id"),
        (_listing("", 3), "no usable model id"),
    ],
)
def test_parse_refuses_what_is_no_model_list(body: bytes, reason: str) -> None:
    with pytest.raises(DiscoveryError, match=reason):
        parse_models(body, 32)


class FakeUpstreams:
    """Answers per (lane, url) that a test changes between rounds."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], bytes | DiscoveryError] = {}
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, lane: str, url: str) -> bytes:
        self.asked.append((lane, url))
        answer = self.answers[(lane, url)]
        if isinstance(answer, DiscoveryError):
            raise answer
        return answer


async def test_a_lane_learns_its_upstreams_models_and_a_failure_keeps_the_last_known() -> None:
    up = FakeUpstreams()
    now = [1000.0]
    learner = ModelLearner({"fast": ["http://a", "http://b"]}, up, max_models=32, clock=lambda: now[0])
    up.answers = {("fast", "http://a"): _listing("small"), ("fast", "http://b"): _listing("small", "lora")}
    assert await learner.refresh() is True
    assert learner.models() == {"fast": ("small", "lora")}  # both upstreams' lists, in upstream order
    assert (learner.checked_at, learner.errors, learner.failures["fast"]) == ({"fast": 1000.0}, {}, 0)

    now[0] = 1060.0
    up.answers[("fast", "http://b")] = DiscoveryError("GET /v1/models answered 503")
    up.answers[("fast", "http://a")] = DiscoveryError("GET /v1/models took longer than 5 s")
    assert await learner.refresh() is False  # both failed: what they said last still holds
    assert learner.models() == {"fast": ("small", "lora")}
    assert learner.errors == {"fast": "GET /v1/models took longer than 5 s"}
    assert (learner.checked_at["fast"], learner.failures["fast"]) == (1060.0, 2)

    up.answers[("fast", "http://a")] = _listing("small-v2")
    up.answers[("fast", "http://b")] = _listing("small-v2")
    assert await learner.refresh() is True
    assert learner.models() == {"fast": ("small-v2",)} and learner.errors == {}


async def test_a_lane_whose_upstreams_never_answered_has_no_models() -> None:
    up = FakeUpstreams()
    up.answers[("slow", "http://c")] = DiscoveryError("GET /v1/models failed: ClientConnectorError")
    learner = ModelLearner({"slow": ["http://c"]}, up, max_models=32)
    assert await learner.refresh() is False
    assert learner.models() == {} and learner.lanes == ("slow",)


async def test_the_cap_holds_across_a_lanes_upstreams() -> None:
    up = FakeUpstreams()
    up.answers = {("l", "http://a"): _listing("a1", "a2"), ("l", "http://b"): _listing("b1", "b2")}
    learner = ModelLearner({"l": ["http://a", "http://b"]}, up, max_models=3)
    await learner.refresh()
    assert learner.models() == {"l": ("a1", "a2", "b1")}


async def test_the_loop_refreshes_every_interval_and_reports_changes() -> None:
    up = FakeUpstreams()
    up.answers[("fast", "http://a")] = _listing("small")
    learner = ModelLearner({"fast": ["http://a"]}, up, max_models=32)
    slept: list[float] = []
    changes: list[dict[str, tuple[str, ...]]] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            up.answers[("fast", "http://a")] = _listing("small", "other")
        if len(slept) > 3:
            raise asyncio.CancelledError  # the gateway's shutdown

    with pytest.raises(asyncio.CancelledError):
        await run_discovery(learner, 60.0, lambda: changes.append(learner.models()), sleep)
    assert slept == [60.0] * 4 and len(up.asked) == 3
    assert changes == [{"fast": ("small",)}, {"fast": ("small", "other")}]


@asynccontextmanager
async def _upstream(handler: Any) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/v1/models", handler)
    runner, url = await serve_app(app)
    try:
        yield url
    finally:
        await runner.cleanup()


async def _fetch(url: str, **kw: Any) -> bytes:
    opts: dict[str, Any] = {"headers": {}, "tls": None, "timeout_s": 2.0, "max_bytes": 4096, **kw}
    async with aiohttp.ClientSession() as session:
        return await fetch_models(session, url, **opts)


async def test_fetch_reads_the_list_and_sends_the_lanes_key() -> None:
    seen: list[str | None] = []

    async def models(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(body=_listing("big"), content_type="application/json")

    async with _upstream(models) as url:
        assert parse_models(await _fetch(url, headers={"Authorization": "Bearer k"}), 32) == ("big",)
    assert seen == ["Bearer k"]


async def test_fetch_refuses_an_answer_over_the_byte_cap_with_or_without_a_length() -> None:
    async def sized(_r: web.Request) -> web.Response:
        return web.Response(body=b"x" * 10_000)

    async def chunked(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for _ in range(100):
            await resp.write(b"y" * 1024)
        await resp.write_eof()
        return resp

    for handler in (sized, chunked):
        async with _upstream(handler) as url:
            with pytest.raises(DiscoveryError, match="larger than 4096 bytes"):
                await _fetch(url)


async def test_fetch_gives_up_after_its_timeout_and_names_no_url() -> None:
    release = asyncio.Event()

    async def silent(_r: web.Request) -> web.Response:
        await release.wait()
        return web.Response()

    async def missing(_r: web.Request) -> web.Response:
        return web.Response(status=404)

    async with _upstream(silent) as url:
        with pytest.raises(DiscoveryError, match=r"took longer than 0\.2 s"):
            await _fetch(url, timeout_s=0.2)
        release.set()
    async with _upstream(missing) as url:
        with pytest.raises(DiscoveryError, match="answered 404"):
            await _fetch(url)
    with pytest.raises(DiscoveryError) as info:
        await _fetch("http://user:secret@127.0.0.1:9")
    assert "ClientConnectorError" in str(info.value) and "secret" not in str(info.value)


def test_only_lanes_without_declared_models_learn_unless_turned_off() -> None:
    lanes = {
        "fast": {"upstreams": ["http://f:1"], "models": ["small"]},
        "slow": {"upstreams": ["http://s:1"]},
    }
    gw = Gateway(GatewayConfig.model_validate({"lanes": lanes}))
    assert gw.learner is not None and gw.learner.lanes == ("slow",)
    assert (gw.models.source("fast"), gw.models.source("slow")) == ("declared", "unknown")
    assert gw.stats.lane_models == (("fast", "small", "declared"),)
    off = GatewayConfig.model_validate({"lanes": lanes, "model_discovery": {"enabled": False}})
    assert Gateway(off).learner is None


async def test_a_bug_in_a_round_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(_lane: str, _url: str) -> bytes:
        raise RuntimeError("bug")

    learner = ModelLearner({"fast": ["http://a"]}, broken, max_models=32)
    assert await refresh_safely(learner) is False
    assert "model discovery round failed" in caplog.text and learner.models() == {}
