"""The real-engine fault against a streaming server on 127.0.0.1: the burst keeps its requests
open, replaces each that finishes, and `stop` cuts the open ones (the server sees them go)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from lanewatch.collector.demo.burst import Burst, BurstSpec
from tests.servers import serve_app

pytestmark = pytest.mark.integration


@dataclass
class Engine:
    """A vLLM stand-in: streams `max_tokens` chunks `gap_s` apart; counts open, finished, cut."""

    gap_s: float = 0.05
    first_s: float = 0.0  # before the first chunk: the prompt's prefill
    url: str = ""
    open: int = 0
    most_open: int = 0
    finished: int = 0
    cut: int = 0
    prompts: list[str] = field(default_factory=list)


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    state = Engine()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        state.prompts.append(body["messages"][0]["content"])
        state.open += 1
        state.most_open = max(state.most_open, state.open)
        resp = web.StreamResponse()
        resp.content_type = "text/event-stream"
        try:
            await resp.prepare(request)
            await asyncio.sleep(state.first_s)
            for _ in range(body["max_tokens"]):
                await asyncio.sleep(state.gap_s)
                await resp.write(b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n')
            await resp.write(b"data: [DONE]\n\n")
            state.finished += 1
        except (asyncio.CancelledError, ConnectionResetError):
            state.cut += 1
            raise
        finally:
            state.open -= 1
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner, state.url = await serve_app(app, handler_cancellation=True)
    try:
        yield state
    finally:
        await runner.cleanup()


async def until(check: Callable[[], bool], within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_the_burst_keeps_its_requests_open_until_stopped(engine: Engine) -> None:
    burst = Burst(engine.url, "lanewatch-demo-big", BurstSpec(concurrency=3, prompt_words=40, max_tokens=4))
    burst.start()
    await until(lambda: engine.finished >= 6)  # each finished request was replaced
    assert engine.most_open == 3
    assert len(set(engine.prompts)) == len(engine.prompts)  # every prompt new work
    engine.gap_s = 10.0  # the next ones stay open
    await until(lambda: engine.open == 3)
    started = time.monotonic()
    await burst.stop()
    await until(lambda: engine.open == 0, within_s=10.0)
    assert time.monotonic() - started < 5.0  # cut, not waited for
    assert engine.cut >= 1
    stats = burst.stats()
    assert stats["finished"] == engine.finished and stats["errors"] == {}
    assert stats["sent"] == len(engine.prompts)
    sent = stats["sent"]
    await asyncio.sleep(0.3)
    assert burst.stats()["sent"] == sent  # nothing after stop


async def test_a_refusing_server_is_counted_not_hammered() -> None:
    burst = Burst("http://127.0.0.1:9", "m", BurstSpec(concurrency=2, prompt_words=5, max_tokens=1))
    burst.start()
    await asyncio.sleep(1.5)
    await burst.stop()
    stats = burst.stats()
    assert stats["finished"] == 0 and sum(stats["errors"].values()) == stats["sent"]
    assert stats["sent"] <= 6  # a pause between attempts: 2 loops over 1.5 s


@pytest.mark.parametrize(("first_s", "expect_open"), [(0.05, 8), (0.5, 2)])
async def test_the_burst_keeps_open_what_queues_its_slos_on_this_engine(
    engine: Engine, first_s: float, expect_open: int
) -> None:
    # One prompt alone first: 0.05 s to its first chunk asks for 20 open to queue 1 s (at most 8);
    # 0.5 s (or up to 1 s, on a loaded machine) for 2.
    engine.first_s = first_s
    spec = BurstSpec(concurrency=8, prompt_words=5, max_tokens=2, queue_slos=2.0)
    burst = Burst(engine.url, "m", spec, ttft_slo_s=0.5)
    burst.start()
    await until(lambda: engine.finished >= expect_open + 1)
    await burst.stop()
    stats = burst.stats()
    assert stats["open"] == expect_open and stats["solo_s"] >= first_s
    assert engine.most_open == expect_open
