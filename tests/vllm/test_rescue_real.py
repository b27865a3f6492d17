"""The rescue's loser on a real vLLM: closing its stream makes the engine drop the request.

The slow lane is the real vLLM (the CPU build, the tiny model), the fast lane the simulator. The
request under test waits on vLLM behind twelve long prompts sent straight to it, so its first
token is late; the gateway rescues it at once on the fast lane, which answers first. The late
attempt runs on until its own first token, and is then closed: vLLM must abort it. Had it not,
it would decode 800 tokens for seconds; instead the engine's running and waiting counts fall to
zero within a second of the background's end, and it generates no more tokens.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.gateway_harness import TRUST_LOOPBACK, eventually, gateway_server
from tests.servers import start_simulator

from .engine import VllmHandle

pytestmark = pytest.mark.vllm

PROMPT = "hello " * 500  # at most 1,000 tokens: each prefill takes the CPU build tens of ms
BACKGROUND = 12
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


@pytest.mark.timeout(300)
async def test_the_late_attempt_a_rescue_beat_is_aborted_in_the_real_engine(
    vllm_server: VllmHandle, tmp_path: Path
) -> None:
    with start_simulator(tmp_path, profile="fast") as sim:
        lanes = {
            "fast": {"upstreams": [sim.url], "models": [sim.model]},
            "slow": {"upstreams": [vllm_server.url], "models": [vllm_server.model]},
        }
        cfg = {"lane_order": ["fast", "slow"], "hints": TRUST_LOOPBACK}
        rescue = {"deadlines": [{"lane": "slow", "after_s": 0.01}]}
        async with (
            gateway_server(lanes, ttft_slos={"fast": 0.5, "slow": 2.0}, rescue=rescue, **cfg) as g,
            httpx.AsyncClient(base_url=vllm_server.url, timeout=120) as engine,
            httpx.AsyncClient(base_url=g.url, timeout=120) as client,
        ):  # fmt: skip
            _, tokens_before = await _vllm_counts(engine)

            async def background() -> None:
                body = {"model": vllm_server.model, "prompt": PROMPT, "max_tokens": 32, "ignore_eos": True}
                answer = await engine.post("/v1/completions", json=body)
                assert answer.status_code == 200, answer.text

            busy = [asyncio.create_task(background()) for _ in range(BACKGROUND)]
            for _ in range(300):  # the background in vLLM first, however slow this machine is
                if (await _vllm_counts(engine))[0] >= BACKGROUND // 2:
                    break
                await asyncio.sleep(0.01)
            body = {
                "model": vllm_server.model,
                "prompt": PROMPT,
                "max_tokens": LOSER_MAX_TOKENS,
                "ignore_eos": True,
                "stream": True,
            }
            async with client.stream(
                "POST", "/v1/completions", json=body, headers={"x-lanewatch-lane": "slow"}
            ) as r:
                lane, rescued_from = (
                    r.headers.get("x-lanewatch-lane"),
                    r.headers.get("x-lanewatch-rescued-from"),
                )
                async for _ in r.aiter_bytes():
                    pass
            await asyncio.gather(*busy)
            assert await eventually(lambda: len(g.records) == 1, within_s=10)
            settled = time.monotonic()
            idle = False
            while time.monotonic() - settled < 1.0 and not idle:
                idle = (await _vllm_counts(engine))[0] == 0
                await asyncio.sleep(0.05)
            _, tokens_after = await _vllm_counts(engine)
            await asyncio.sleep(1.0)
            still_busy, tokens_later = await _vllm_counts(engine)
    assert (lane, rescued_from) == ("fast", "slow")
    (record,) = g.records
    assert record.lane == "fast" and record.late_lane == "slow" and record.late_wait_s is not None
    assert idle and still_busy == 0, "vLLM still holds the closed attempt"
    generated = tokens_after - tokens_before
    assert generated < BACKGROUND * 32 + LOSER_MAX_TOKENS / 10, f"{generated} tokens: the loser decoded on"
    assert tokens_later == tokens_after  # and nothing since
