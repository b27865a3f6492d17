"""A request's work (max_tokens x `n` or `best_of` x prompts) is what a shed's class and a cap read:
`n`, `best_of` and a completions prompt list hide no work. Real gateway on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from .gateway_harness import RunningGateway, chat_body, gateway_server, upstream_server

pytestmark = pytest.mark.integration
CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"


async def _post(
    s: aiohttp.ClientSession, g: RunningGateway, path: str, body: dict[str, Any]
) -> tuple[int, dict[str, str], dict[str, Any]]:
    async with s.post(g.url + path, json=body) as r:
        return r.status, dict(r.headers), await r.json(content_type=None)


def _completion(max_tokens: int, prompt: str | list[str] = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": "test-model", "max_tokens": max_tokens, "prompt": prompt, "stream": False, **extra}


async def test_n_best_of_and_a_prompt_list_pass_no_batch_shed() -> None:
    async with (
        upstream_server(first_ms=1, gap_ms=0) as (_fast, fast_url),
        upstream_server(first_ms=1, gap_ms=0) as (slow, slow_url),
        gateway_server({"fast": [fast_url], "slow": [slow_url]}, admin_insecure=True) as g,
        aiohttp.ClientSession() as s,
    ):
        async with s.put(
            f"{g.url}/admin/degrade", json={"lanes": {"slow": {"shed_classes": ["batch"]}}}
        ) as r:
            assert r.status == 200
        # the default rules: a work of 1024 tokens or more is batch; 1000 alone is not
        assert (await _post(s, g, CHAT, chat_body(max_tokens=1000, stream=False)))[0] == 200
        hidden = [
            (CHAT, chat_body(max_tokens=1000, stream=False, n=16)),  # 16 answers of 1000
            (COMPLETIONS, _completion(1000, ["hi"] * 50)),  # 50 prompts of 1000
            (COMPLETIONS, _completion(1000, best_of=20)),  # 20 sequences of 1000, one returned
            (CHAT, chat_body(max_tokens=64, stream=False, n="16")),  # vLLM reads "16" as 16: 1024
        ]
        for path, body in hidden:
            status, headers, _ = await _post(s, g, path, body)
            assert status == 429, body
            assert headers["x-lanewatch-degraded"] == "shed" and headers["Retry-After"]
    assert len(slow.requests) == 1  # only the plain 1000
    assert [r.request_class for r in g.records] == ["interactive"]
    assert g.gw.stats.shed[("slow", "batch")] == len(hidden)


async def test_a_cap_bounds_the_work_and_refuses_what_it_cannot_bound() -> None:
    async with (
        upstream_server(first_ms=1, gap_ms=0) as (_fast, fast_url),
        upstream_server(first_ms=1, gap_ms=0) as (slow, slow_url),
        gateway_server({"fast": [fast_url], "slow": [slow_url]}, admin_insecure=True) as g,
        aiohttp.ClientSession() as s,
    ):
        async with s.put(f"{g.url}/admin/degrade", json={"lanes": {"slow": {"cap_max_tokens": 64}}}) as r:
            assert r.status == 200
        served = [
            (CHAT, chat_body(max_tokens=64, stream=False, n=64), 1),  # 4,096 tokens asked: 64 x 1
            (CHAT, chat_body(max_tokens=100, stream=False, n=4), 16),
            (COMPLETIONS, _completion(100, ["a", "b", "c", "d", "e", "f", "g", "h"]), 8),
            (COMPLETIONS, _completion(100, n=2, best_of=4), 16),
            (CHAT, chat_body(max_tokens=8, stream=False, n=4), 8),  # 32: under the cap, unchanged
        ]
        for path, body, _ in served:
            status, _, _ = await _post(s, g, path, body)
            assert status == 200, body
        got = [log.body for log in slow.requests.values()]
        assert [b["max_tokens"] for b in got] == [want for _, _, want in served]
        assert all(b.get("n") == body.get("n") for b, (_, body, _) in zip(got, served, strict=True))
        # 100 sequences of at least one token each: more than 64, whatever max_tokens says
        status, headers, answer = await _post(s, g, CHAT, chat_body(max_tokens=8, stream=False, n=100))
        assert status == 429
        assert headers["x-lanewatch-degraded"] == "cap_max_tokens" and headers["Retry-After"]
        assert "64" in answer["error"]["message"] and "100" in answer["error"]["message"]
        assert len(slow.requests) == len(served)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (CHAT, chat_body(n=0), "n"),
        (CHAT, chat_body(n=True), "n"),
        (CHAT, chat_body(n=2.5), "n"),
        (CHAT, chat_body(n="many"), "n"),
        (COMPLETIONS, _completion(4, n=None), "n"),  # vLLM's CompletionRequest.n is `int`
        (COMPLETIONS, _completion(4, best_of=-1), "best_of"),
        (COMPLETIONS, _completion(4, prompt_embeds=[1, 2]), "prompt_embeds"),
    ],
)
async def test_a_count_vllm_refuses_is_a_400_naming_it(path: str, body: dict[str, Any], field: str) -> None:
    async with (
        upstream_server(first_ms=1, gap_ms=0) as (up, url),
        gateway_server({"slow": [url]}) as g,
        aiohttp.ClientSession() as s,
    ):
        status, _, answer = await _post(s, g, path, body)
    assert (status, answer["error"]["param"]) == (400, field)
    assert not up.requests
