"""The demo's traffic against a real streaming server on 127.0.0.1: what it sends, what it reads
from the response headers, and how it stops (open requests finish, unless aborted)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from lanewatch.collector.demo.traffic import Noise, Traffic, TrafficClass
from lanewatch.collector.probe.settings import RequestClass
from tests.servers import serve_app
from tests.waiting import eventually_async

pytestmark = pytest.mark.integration
CHUNK_GAP_S = 0.05


@dataclass
class Upstream:
    """A gateway stand-in: one SSE chunk per max_tokens, CHUNK_GAP_S apart; counts whole answers."""

    url: str = ""
    bodies: list[dict[str, object]] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)
    finished: int = 0
    upload_s: list[float] = field(default_factory=list)  # from the head to the body's end


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    state = Upstream()

    async def chat(request: web.Request) -> web.StreamResponse:
        head_at = time.monotonic()
        body = json.loads(await request.read())
        state.upload_s.append(time.monotonic() - head_at)
        state.bodies.append(body)
        state.classes.append(request.headers.get("x-lanewatch-class", ""))
        resp = web.StreamResponse(headers={"x-lanewatch-lane": "fast", "x-lanewatch-degraded": "shift"})
        resp.content_type = "text/event-stream"
        await resp.prepare(request)
        for _ in range(body["max_tokens"]):
            await asyncio.sleep(CHUNK_GAP_S)
            await resp.write(b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n')
        await resp.write(b"data: [DONE]\n\n")
        state.finished += 1
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner, state.url = await serve_app(app)
    try:
        yield state
    finally:
        await runner.cleanup()


def mix(tokens: int) -> tuple[TrafficClass, ...]:
    return (TrafficClass(RequestClass(name="story", prompt_words=5, max_tokens=tokens), 1.0),)


async def test_requests_stream_through_and_open_ones_finish_when_traffic_stops(upstream: Upstream) -> None:
    traffic = Traffic(upstream.url, "lanewatch-demo", rate_per_s=20.0, seed=1, mix=mix(40))
    stop = asyncio.Event()
    task = asyncio.create_task(traffic.run(stop, drain_s=30.0))
    await eventually_async(lambda: traffic.sent >= 5, 30, "five requests sent")
    stop.set()
    await asyncio.wait_for(task, 60)
    assert upstream.finished == traffic.sent >= 5  # every open stream ran to its end
    assert not traffic.errors
    body = upstream.bodies[0]
    assert body["model"] == "lanewatch-demo" and body["stream"] is True and body["ignore_eos"] is True
    assert body["max_tokens"] == 40 and "Write a long story" in json.dumps(body["messages"])
    assert set(upstream.classes) == {"story"}
    assert [(s.routed, s.served, s.degraded) for s in traffic.history][:1] == [("slow", "fast", "shift")]
    assert len(traffic.history) == traffic.sent


async def test_abort_cuts_the_drain_short(upstream: Upstream) -> None:
    traffic = Traffic(upstream.url, "m", rate_per_s=20.0, seed=2, mix=mix(600))  # 30 s streams
    stop, abort = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(traffic.run(stop, drain_s=60.0, abort=abort))
    await eventually_async(
        lambda: len(traffic.history) >= 3, 30, "three streams open"
    )  # some streams open, headers read
    abort.set()
    stop.set()
    started = time.monotonic()
    await asyncio.wait_for(task, 60)
    assert time.monotonic() - started < 10.0  # not the 30 s the streams need
    assert upstream.finished == 0 and traffic.inflight == 0


async def test_noise_sends_whole_answers_slow_uploads_and_leaves_early(upstream: Upstream) -> None:
    noise = Noise(non_streamed=0.5, slow_upload=0.3, upload_s=0.6, disconnect=0.3, disconnect_after_s=0.2)
    traffic = Traffic(upstream.url, "m", rate_per_s=20.0, seed=4, mix=mix(20), noise=noise)  # 1 s answers
    stop = asyncio.Event()
    task = asyncio.create_task(traffic.run(stop, drain_s=30.0))
    await eventually_async(lambda: traffic.sent >= 30, 30, "thirty requests sent")
    stop.set()
    await asyncio.wait_for(task, 60)
    streams = [b["stream"] for b in upstream.bodies]
    assert streams.count(False) == traffic.manners["non_streamed"] > 0 and True in streams
    slow = sorted(upstream.upload_s)[-traffic.manners["slow_upload"] :]
    assert traffic.manners["slow_upload"] > 0 and min(slow) >= 0.5  # the body held about 0.6 s
    assert sorted(upstream.upload_s)[0] < 0.1
    # the ones that left early never saw their answer's end
    assert traffic.manners["disconnect"] > 0
    assert upstream.finished <= traffic.sent - traffic.manners["disconnect"]
