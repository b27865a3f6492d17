"""Lanes serving different models: a shifted request is rewritten to the serving lane's model.

Two `lanewatch sim` lanes serve the model names of deploy/compose (a simulator answers 404
for any other name, as vLLM does), and the real openai client streams through the gateway.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
import yaml
from openai.types.chat import ChatCompletionMessageParam

from lanewatch.collector.config import load_config
from lanewatch.collector.gateway import Gateway, GatewayServer
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.record.timing import RequestTiming
from tests.servers import SimHandle, start_simulator

from .gateway_harness import RunningGateway, gateway_server, upstream_server

pytestmark = pytest.mark.integration
COMPOSE_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "compose" / "lanewatch.yaml"
HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hello there, how are you?"}]
TOKEN = "models-admin-token"
SHIFT_ALL = {"lanes": {"slow": {"shift_to": "fast", "shift_percent": 100}}}


def _compose_models() -> dict[str, str]:
    """Lane -> the model deploy/compose's targets name (read raw, so the file is not trusted blindly)."""
    data = yaml.safe_load(COMPOSE_CONFIG.read_text())
    return {t["lane"]: t["model"] for t in data["targets"]}


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimHandle, SimHandle]]:
    tmp = tmp_path_factory.mktemp("model-sims")
    models = _compose_models()
    with (
        start_simulator(tmp, profile="fast", model=models["fast"]) as fast,
        start_simulator(tmp, profile="slow", model=models["slow"]) as slow,
    ):
        assert fast.model != slow.model
        yield fast, slow


async def _put_degrade(g: RunningGateway, state: dict[str, Any], token: str | None = None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as s,
        s.put(f"{g.url}/admin/degrade", json=state, headers=headers) as r,
    ):
        assert r.status == 200, await r.text()


async def _shift_all(g: RunningGateway, token: str | None = None) -> None:
    await _put_degrade(g, SHIFT_ALL, token)


async def _stream(
    client: openai.AsyncOpenAI, model: str, max_tokens: int
) -> tuple[dict[str, str], list[str], str]:
    """One streamed chat request: (lanewatch response headers, the chunks' model fields, the text)."""
    stream = await client.chat.completions.create(
        model=model,
        messages=HELLO,
        max_tokens=max_tokens,
        stream=True,
        extra_headers={"x-request-id": f"models-{uuid.uuid4().hex}"},
        extra_body={"ignore_eos": True},
    )
    headers = {k: v for k, v in stream.response.headers.items() if k.startswith("x-lanewatch-")}
    chunk_models, text = [], ""
    async for chunk in stream:
        chunk_models.append(chunk.model)
        text += "".join(c.delta.content or "" for c in chunk.choices)
    return headers, chunk_models, text


async def _stream_all_shifted(g: RunningGateway, fast: SimHandle, slow: SimHandle, n: int) -> None:
    """`n` requests for the slow lane's model, all shifted: each streams whole and names both models."""
    client = openai.AsyncOpenAI(base_url=f"{g.url}/v1", api_key="unused", max_retries=0)
    try:
        for i in range(n):
            headers, chunk_models, text = await _stream(client, slow.model, max_tokens=4 + i)
            assert headers["x-lanewatch-lane"] == "fast"
            assert headers["x-lanewatch-degraded"] == "shift"
            assert headers["x-lanewatch-model"] == f"{slow.model} -> {fast.model}"
            assert chunk_models and set(chunk_models) == {fast.model}  # as the engine wrote it
            assert text  # the stream carried content
    finally:
        await client.close()
    shifted = [r for r in g.records if r.attrs.get("degraded") == "shift"]
    assert len(shifted) == n
    for record in shifted:
        assert (record.lane, record.model, record.error, record.status) == ("fast", fast.model, None, 200)
        assert (record.attrs["routed_lane"], record.attrs["requested_model"]) == ("slow", slow.model)
    assert fast.truth(shifted[0].request_id or "")["output_tokens"] == 4  # the fast engine served it


async def test_a_full_shift_to_a_lane_with_another_model_streams_every_request(
    sims: tuple[SimHandle, SimHandle],
) -> None:
    fast, slow = sims
    lanes = {
        "fast": {"upstreams": [fast.url], "models": [fast.model]},
        "slow": {"upstreams": [slow.url], "models": [slow.model]},
    }
    async with gateway_server(lanes, lane_order=["fast", "slow"], admin_insecure=True) as g:
        client = openai.AsyncOpenAI(base_url=f"{g.url}/v1", api_key="unused", max_retries=0)
        before, _, _ = await _stream(client, slow.model, max_tokens=3)  # no degrade yet: served as asked
        await client.close()
        assert (before["x-lanewatch-lane"], before["x-lanewatch-model"]) == (
            "slow",
            f"{slow.model} -> {slow.model}",
        )
        await _shift_all(g)
        await _stream_all_shifted(g, fast, slow, n=6)


async def test_an_explicit_map_picks_the_served_model(sims: tuple[SimHandle, SimHandle]) -> None:
    fast, slow = sims
    lanes = {
        # The fast lane lists a name its engine does not serve first; the map picks the one it does.
        "fast": {
            "upstreams": [fast.url],
            "models": ["not-loaded", fast.model],
            "model_map": {slow.model: fast.model},
        },
        "slow": {"upstreams": [slow.url], "models": [slow.model]},
    }
    async with gateway_server(lanes, lane_order=["fast", "slow"], admin_insecure=True) as g:
        await _shift_all(g)
        await _stream_all_shifted(g, fast, slow, n=2)


async def test_a_model_no_lane_serves_is_a_404_naming_the_lanes_models(
    sims: tuple[SimHandle, SimHandle],
) -> None:
    fast, slow = sims
    lanes = {
        "fast": {"upstreams": [fast.url], "models": [fast.model]},
        "slow": {"upstreams": [slow.url], "models": [slow.model]},
    }
    async with gateway_server(lanes, lane_order=["fast", "slow"]) as g:
        client = openai.AsyncOpenAI(base_url=f"{g.url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.NotFoundError) as info:
            await _stream(client, "gpt-4o", max_tokens=3)
        await client.close()
        served = sum(g.gw.stats.requests.values())
    error: Any = info.value.body
    assert info.value.status_code == 404
    assert error["type"] == "NotFoundError" and error["param"] == "model" and error["code"] == 404
    assert error["message"] == (
        "The model `gpt-4o` does not exist on this gateway. "
        f"Lanes serve fast: {fast.model}; slow: {slow.model}."
    )
    assert served == 0 and g.records == []  # refused before any lane saw it


@asynccontextmanager
async def _gateway_of(cfg: GatewayConfig) -> AsyncIterator[RunningGateway]:
    records: list[RequestTiming] = []
    server = GatewayServer(Gateway(cfg, on_record=records.append))
    port = await server.start("127.0.0.1", 0)
    try:
        yield RunningGateway(f"http://127.0.0.1:{port}", server.gw, records)
    finally:
        await server.shutdown()


async def test_the_compose_config_as_shipped_shifts_to_the_fast_model(
    sims: tuple[SimHandle, SimHandle], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = sims
    token_file = tmp_path / "gateway-admin-token"
    token_file.write_text(TOKEN + "\n")
    ingest_file = tmp_path / "ingest-token"
    ingest_file.write_text("models-ingest-token\n")
    # Only addresses change, through the config's environment overrides: the upstreams (compose's
    # service names do not resolve here) and the tokens' paths (compose secrets and its volume).
    monkeypatch.setenv("LANEWATCH__GATEWAY__LANES__FAST__UPSTREAMS", f'["{fast.url}"]')
    monkeypatch.setenv("LANEWATCH__GATEWAY__LANES__SLOW__UPSTREAMS", f'["{slow.url}"]')
    monkeypatch.setenv("LANEWATCH__GATEWAY__ADMIN_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("LANEWATCH__GATEWAY__COLLECTOR_TOKEN_FILE", str(ingest_file))
    cfg = load_config(COMPOSE_CONFIG).gateway
    assert cfg.lanes["fast"].models == [fast.model] and cfg.lanes["slow"].models == [slow.model]
    async with _gateway_of(cfg) as g:
        await _shift_all(g, TOKEN)
        await _stream_all_shifted(g, fast, slow, n=6)


async def test_the_rewritten_body_keeps_every_other_field_and_its_length() -> None:
    async with (
        upstream_server(model="small") as (fast_up, fast_url),
        upstream_server(model="big") as (_slow_up, slow_url),
    ):
        lanes = {
            "fast": {"upstreams": [fast_url], "models": ["small"]},
            "slow": {"upstreams": [slow_url], "models": ["big"]},
        }
        async with gateway_server(lanes, lane_order=["fast", "slow"], admin_insecure=True) as g:
            await _put_degrade(
                g, {"lanes": {"slow": {"shift_to": "fast", "shift_percent": 100, "cap_max_tokens": 5}}}
            )
            body = {
                "model": "big",
                "messages": [{"role": "user", "content": 'héllo "quoted" \u2603 model: big'}],
                "max_tokens": 50,
                "stream": True,
                "stream_options": {"include_usage": True},
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "f",
                            "parameters": {"properties": {"model": {"type": "string"}}},
                        },
                    }
                ],
            }
            async with aiohttp.ClientSession() as s, s.post(f"{g.url}/v1/chat/completions", json=body) as r:
                assert r.status == 200
                assert r.headers["x-lanewatch-model"] == "big -> small"
                assert r.headers["x-lanewatch-degraded"] == "shift,cap_max_tokens"
                await r.read()
    seen = fast_up.last()
    assert seen.body == {**body, "model": "small", "max_tokens": 5}  # only the model and the cap changed
    sent = json.dumps(seen.body, separators=(",", ":")).encode()
    assert seen.headers["Content-Length"] == str(len(sent))


async def test_a_cap_alone_is_no_model_rewrite() -> None:
    async with (
        upstream_server(model="big") as (up, url),
        gateway_server({"slow": {"upstreams": [url], "models": ["big"]}}, admin_insecure=True) as g,
    ):
        await _put_degrade(g, {"lanes": {"slow": {"cap_max_tokens": 2}}})
        async with aiohttp.ClientSession() as s:
            body = {"model": "big", "max_tokens": 9, "stream": True, "messages": HELLO}
            async with s.post(f"{g.url}/v1/chat/completions", json=body) as r:
                assert r.headers["x-lanewatch-model"] == "big -> big"
                await r.read()
    (record,) = g.records
    assert up.last().body["max_tokens"] == 2 and up.last().body["model"] == "big"
    assert record.model == "big" and "requested_model" not in record.attrs
