"""The rescue's loser on a real vLLM: closing its stream makes the engine drop the request.

The slow lane is the real vLLM (the CPU build, the tiny model), the fast lane an upstream in this
process that answers at once (on a loaded machine a simulator process can be slower than vLLM). The
request under test waits on vLLM behind sixteen long prompts sent straight to it, so its first
token is late; the gateway rescues it at once on the fast lane, which answers first. The late
attempt runs on until its own first token, and is then closed: vLLM must abort it. Had it not,
it would decode 800 tokens for seconds; instead the engine's running and waiting counts fall to
zero within a second of the background's end, and it generates no more tokens.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass

import httpx
import pytest

from lanewatch.collector.record.timing import RequestTiming
from tests.integration.gateway_harness import (
    TRUST_LOOPBACK,
    RunningGateway,
    eventually,
    gateway_server,
    upstream_server,
)

from .engine import VllmHandle

pytestmark = pytest.mark.vllm

PROMPT = "hello " * 500  # at most 1,000 tokens: each prefill takes the CPU build tens of ms
# The background: prompts near the model's 2,048-token context, whose prefills fill vLLM's steps
# for a second or so, so that the request under test waits in vLLM's queue behind them.
BACKGROUND_PROMPT = "hello " * 600
BACKGROUND = 16
LOSER_MAX_TOKENS = 800  # what the late attempt would decode if it were not closed (2,048 in all at most)


def _gauge(text: str, name: str) -> float:
    """The sum of a vLLM metric's samples (0 when absent)."""
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", re.M)
    return sum(float(v) for v in pattern.findall(text))


async def _vllm_counts(client: httpx.AsyncClient) -> tuple[float, float]:
    """(running + waiting requests, generation tokens so far) from vLLM's /metrics."""
    text = (await client.get("/metrics")).text
    busy = _gauge(text, "vllm:num_requests_running") + _gauge(text, "vllm:num_requests_waiting")
    return busy, _gauge(text, "vllm:generation_tokens_total")


@dataclass
class Race:
    """One request through the gateway while vLLM is busy, and what vLLM did around it."""

    lane: str | None
    rescued_from: str | None
    record: RequestTiming
    idle: bool  # running + waiting fell to 0 within a second of the background's end
    generated: float  # tokens vLLM generated in all, the background's included
    later: float  # tokens generated in the second after that
    still_busy: float


async def _race(g: RunningGateway, client: httpx.AsyncClient, engine: httpx.AsyncClient, model: str) -> Race:
    before = len(g.records)
    _, tokens_before = await _vllm_counts(engine)

    async def background() -> None:
        body = {"model": model, "prompt": BACKGROUND_PROMPT, "max_tokens": 32, "ignore_eos": True}
        answer = await engine.post("/v1/completions", json=body)
        assert answer.status_code == 200, answer.text

    busy = [asyncio.create_task(background()) for _ in range(BACKGROUND)]
    for _ in range(300):  # the background in vLLM first, however slow this machine is
        if (await _vllm_counts(engine))[0] >= BACKGROUND // 2:
            break
        await asyncio.sleep(0.01)
    body = {
        "model": model,
        "prompt": PROMPT,
        "max_tokens": LOSER_MAX_TOKENS,
        "ignore_eos": True,
        "stream": True,
    }
    async with client.stream("POST", "/v1/completions", json=body, headers={"x-lanewatch-lane": "slow"}) as r:
        lane, rescued_from = r.headers.get("x-lanewatch-lane"), r.headers.get("x-lanewatch-rescued-from")
        async for _ in r.aiter_bytes():
            pass
    await asyncio.gather(*busy)
    assert await eventually(lambda: len(g.records) == before + 1, within_s=10)
    settled = time.monotonic()
    idle = False
    while time.monotonic() - settled < 1.0 and not idle:
        idle = (await _vllm_counts(engine))[0] == 0
        await asyncio.sleep(0.05)
    _, tokens_after = await _vllm_counts(engine)
    await asyncio.sleep(1.0)
    still_busy, tokens_later = await _vllm_counts(engine)
    return Race(
        lane, rescued_from, g.records[-1], idle, tokens_after - tokens_before, tokens_later - tokens_after,
        still_busy,
    )  # fmt: skip


@pytest.mark.timeout(600)
async def test_the_late_attempt_a_rescue_beat_is_aborted_in_the_real_engine(vllm_server: VllmHandle) -> None:
    async with upstream_server(first_ms=1, gap_ms=1, model="fast-model") as (fast, fast_url):
        lanes = {
            "fast": {"upstreams": [fast_url], "models": [fast.model]},
            "slow": {"upstreams": [vllm_server.url], "models": [vllm_server.model]},
        }
        cfg = {"lane_order": ["fast", "slow"], "hints": TRUST_LOOPBACK}
        rescue = {"deadlines": [{"lane": "slow", "after_s": 0.01}]}
        async with (
            gateway_server(lanes, ttft_slos={"fast": 0.5, "slow": 2.0}, rescue=rescue, **cfg) as g,
            httpx.AsyncClient(base_url=vllm_server.url, timeout=120) as engine,
            httpx.AsyncClient(base_url=g.url, timeout=120) as client,
        ):  # fmt: skip
            # What is checked is the engine's side of a rescue that won. vLLM's prefills take both
            # cores of this machine, and on a loaded one they can starve this process (the gateway)
            # for seconds, so that the late attempt's first token comes first and no rescue wins:
            # then the race is run again, three times at most.
            races = []
            for _ in range(3):
                races.append(await _race(g, client, engine, vllm_server.model))
                if races[-1].rescued_from is not None:
                    break
            outcomes = dict(g.gw.stats.rescues)
    race = races[-1]
    assert (race.lane, race.rescued_from) == ("fast", "slow"), (outcomes, [r.record.to_json() for r in races])
    assert (
        race.record.lane == "fast" and race.record.late_lane == "slow" and race.record.late_wait_s is not None
    )
    assert race.idle and race.still_busy == 0, "vLLM still holds the closed attempt"
    # The late attempt decodes from its first token until the gateway closes it: a few dozen tokens
    # on a quiet machine, about a hundred on a loaded one; never most of its 800.
    assert race.generated < BACKGROUND * 32 + LOSER_MAX_TOKENS / 2, (
        f"{race.generated} tokens: the loser decoded on"
    )
    assert race.later == 0  # and nothing since
