"""The quick start, with no model declared: lanes learn their models from their upstreams' /v1/models.

Two `lanewatch sim` processes serve different model names (each answers 404 for any other name,
as vLLM does) and a `lanewatch gateway` process is started with `--upstream` flags only. A full
shift must then answer every request for the slow lane's model 2xx from the fast lane, with the
model rewritten. A shift to a lane whose models are not known is refused, never sent to 404.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.exporters import names
from tests.servers import SimHandle, serve_app, start_simulator
from tests.waiting import eventually_async

from .gateway_harness import RunningGateway, chat_body, gateway_server, start_gateway, upstream_server

pytestmark = pytest.mark.integration
TOKEN = "learned-models-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SHIFT_ALL = {"lanes": {"slow": {"shift_to": "fast", "shift_percent": 100}}}
REQUESTS = 20


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimHandle, SimHandle]]:
    tmp = tmp_path_factory.mktemp("learned-sims")
    with (
        start_simulator(tmp, profile="fast", model="lw-small") as fast,
        start_simulator(tmp, profile="slow", model="lw-big") as slow,
    ):
        yield fast, slow


def _sample(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def _stream(client: httpx.Client, model: str, max_tokens: int) -> tuple[int, dict[str, str], str]:
    """One streamed chat request: (status, lanewatch headers, the whole body)."""
    body = {**chat_body(max_tokens=max_tokens, content="Hello there"), "model": model, "ignore_eos": True}
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        text = "".join(r.iter_text())
        return r.status_code, {k: v for k, v in r.headers.items() if k.startswith("x-lanewatch-")}, text


def test_the_quick_start_with_no_model_flags_shifts_with_no_error(
    sims: tuple[SimHandle, SimHandle], tmp_path: Path
) -> None:
    fast, slow = sims
    token = tmp_path / "admin.token"
    token.write_text(TOKEN + "\n")
    lanes = [f"fast={fast.url}", f"slow={slow.url}"]
    with (
        start_gateway(tmp_path, lanes, "--admin-token-file", str(token)) as gw,
        httpx.Client(base_url=gw.url, timeout=30) as client,
    ):
        models = client.get("/admin/degrade", headers=AUTH).json()["models"]  # learned before it listened
        assert models["fast"]["models"] == ["lw-small"] and models["slow"]["models"] == ["lw-big"]
        assert models["fast"]["source"] == models["slow"]["source"] == "learned"
        status, headers, _ = _stream(client, "lw-big", 3)  # no shift yet: served as asked
        assert (status, headers["x-lanewatch-lane"], headers["x-lanewatch-model"]) == (
            200,
            "slow",
            "lw-big -> lw-big",
        )
        put = client.put("/admin/degrade", json=SHIFT_ALL, headers=AUTH)
        assert put.status_code == 200, put.text
        answers = [_stream(client, "lw-big", 4 + i % 3) for i in range(REQUESTS)]
        metrics = client.get("/metrics").text
    assert [status for status, _, _ in answers] == [200] * REQUESTS  # not one 404
    for _, headers, text in answers:
        assert headers["x-lanewatch-lane"] == "fast" and headers["x-lanewatch-degraded"] == "shift"
        assert headers["x-lanewatch-model"] == "lw-big -> lw-small"
        events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
        assert events and all("error" not in e and e["model"] == "lw-small" for e in events)
        assert text.rstrip().endswith("data: [DONE]")
    info = names.GATEWAY_LANE_MODEL_INFO
    assert _sample(metrics, info, lane="fast", model="lw-small", source="learned") == 1
    assert _sample(metrics, info, lane="slow", model="lw-big", source="learned") == 1


class ModelsUpstream:
    """An upstream whose /v1/models fails until told otherwise (an engine still loading)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.ready = False
        self.app = web.Application()
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_get("/health", self._ok)

    async def _ok(self, _r: web.Request) -> web.Response:
        return web.Response()

    async def _models(self, _r: web.Request) -> web.Response:
        if not self.ready:
            return web.json_response({"error": "loading"}, status=503)
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})


@asynccontextmanager
async def _models_upstream(model: str) -> AsyncIterator[tuple[ModelsUpstream, str]]:
    up = ModelsUpstream(model)
    runner, url = await serve_app(up.app)
    try:
        yield up, url
    finally:
        await runner.cleanup()


async def _admin(
    s: aiohttp.ClientSession, g: RunningGateway, method: str, body: Any = None
) -> tuple[int, dict[str, Any]]:
    async with s.request(method, f"{g.url}/admin/degrade", json=body, headers=AUTH) as r:
        return r.status, await r.json()


async def test_a_shift_to_a_lane_of_unknown_models_is_refused_until_it_learns_them(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    discovery = {"interval_s": 0.2}
    async with (
        _models_upstream("small") as (fast_up, fast_url),
        upstream_server(model="big") as (_slow_up, slow_url),
        gateway_server(
            {"fast": [fast_url], "slow": [slow_url]}, admin_token_file=str(token), model_discovery=discovery
        ) as g,
        aiohttp.ClientSession() as s,
    ):
        status, err = await _admin(s, g, "PUT", SHIFT_ALL)
        assert status == 409, err
        assert err["error"]["param"] == "lanes.slow.shift_to"
        assert "the models of lane 'fast' are not known" in err["error"]["message"]
        assert "--model fast=NAME" in err["error"]["message"]
        status, state = await _admin(s, g, "GET")
        assert (state["lanes"], state["version"]) == ({}, 0)  # nothing changed
        assert state["models"]["fast"]["source"] == "unknown"
        assert state["models"]["fast"]["error"] == "GET /v1/models answered 503"
        assert g.gw.stats.degrade_refused["models_unknown"] == 1
        # The slow lane still serves its own requests as before.
        async with s.post(f"{g.url}/v1/chat/completions", json={**chat_body(), "model": "big"}) as r:
            assert (r.status, r.headers["x-lanewatch-lane"]) == (200, "slow")
            await r.read()

        fast_up.ready = True  # the next refresh learns fast's model; the same PUT then applies
        await eventually_async(lambda: g.gw.models.knows("fast"), 10, "the fast lane's models learned")
        status, state = await _admin(s, g, "PUT", SHIFT_ALL)
        assert status == 200 and state["lanes"]["slow"]["shift_percent"] == 100
        learned = state["models"]["fast"]
        assert (learned["source"], learned["models"], learned["error"]) == ("learned", ["small"], None)
