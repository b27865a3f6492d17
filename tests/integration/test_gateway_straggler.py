"""A straggler: one request with a very long prompt holds the slow lane's prefill for seconds.

The simulated slow lane prefills 2,048 tokens a step (about 0.32 s each, as a 70B model on two
GPUs): a 13,500-token prompt keeps every request that arrives behind it waiting for up to 2.2 s,
past the lane's 2 s TTFT SLO. Short streamed requests flow to the slow lane all along, every other
one opting out of the rescue (the same run without it); of the two sent right behind each
straggler, the first has no rescue and the second has. The straggler itself is `batch`
(its prompt is over 32,000 characters), which the rescue never takes. With the rescue, the short
requests' first tokens all come within the SLO; without it, those that arrived early behind a
straggler miss it. And the fast guard, fed the gateway's progress as a collector would be, fires
for none of it: a moment's blocking is no outage.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import aiohttp
import pytest

from lanewatch.alerts.spec import DEFAULT_SPEC, load_spec
from lanewatch.collector.guard.decide import GuardRule
from lanewatch.collector.guard.guard import FastGuard
from lanewatch.collector.guard.spec import guard_alerts
from lanewatch.collector.record.window import quantile
from tests.servers import SimHandle, start_simulator

from .gateway_harness import TRUST_LOOPBACK, gateway_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SLOS = {"fast": 0.5, "slow": 2.0}
# 13,500 tokens (67,500 characters: batch by the default class rules), held 2.2 s: the requests that
# arrive in its first 0.2 s miss the SLO, and a straggler no longer than (3 s + the SLO) / 2 (the
# guard's window) leaves too few misses among the requests judged for the guard to fire
STRAGGLER = "word " * 13_500
STRAGGLERS_AT_S = (1.0, 7.0, 13.0)
RUN_S = 18.0
EVERY_S = 0.25  # a short request this often, alternately with and without the rescue
# A deadline set by hand, a second before the SLO: the straggler is under test here, not the
# deadline's arithmetic (test_rescue_policy.py), and a loaded machine's lag stays within it
RESCUE = {"deadlines": [{"lane": "slow", "after_s": 1.0}]}


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimHandle, SimHandle]]:
    tmp = tmp_path_factory.mktemp("sims")
    with start_simulator(tmp, profile="fast") as fast, start_simulator(tmp, profile="slow") as slow:
        yield fast, slow


async def _ttft(
    session: aiohttp.ClientSession, url: str, body: dict[str, object], headers: dict[str, str]
) -> float:
    """The client's time to its first content chunk (the whole answer read); inf without one."""
    t0 = time.perf_counter()
    first = float("inf")
    async with session.post(f"{url}/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        async for chunk in r.content.iter_any():
            if first == float("inf") and b'"content":"' in chunk.replace(b'"content":""', b""):
                first = time.perf_counter() - t0
    return first


async def test_short_requests_behind_a_straggler_keep_their_slo_and_no_guard_fires(
    sims: tuple[SimHandle, SimHandle],
) -> None:
    fast, slow = sims
    lanes = {
        "fast": {"upstreams": [fast.url], "models": [fast.model]},
        "slow": {"upstreams": [slow.url], "models": [slow.model]},
    }
    spec = load_spec(DEFAULT_SPEC)
    guard = FastGuard(guard_alerts(spec), GuardRule(), clock=time.perf_counter)  # the collector's, by default
    async with (
        gateway_server(
            lanes, ttft_slos=SLOS, lane_order=["fast", "slow"], hints=TRUST_LOOPBACK, rescue=RESCUE
        ) as g,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200)) as session,
    ):
        guard.watch("gw", g.gw.in_flight)
        fired: list[str] = []

        async def watch() -> None:
            while True:
                guard.evaluate()
                fired.extend(v.lane for v in guard.views() if v.firing)
                await asyncio.sleep(0.2)

        def short(i: int, off: bool) -> asyncio.Task[tuple[bool, float]]:
            body = {"model": slow.model, "messages": [{"role": "user", "content": f"Say something {i}"}],
                    "max_tokens": 16, "stream": True, "ignore_eos": True}  # fmt: skip
            headers = {"x-lanewatch-lane": "slow", **({"x-lanewatch-rescue": "off"} if off else {})}

            async def go() -> tuple[bool, float]:
                return off, await _ttft(session, g.url, body, headers)

            return asyncio.create_task(go())

        def straggler(n: int) -> asyncio.Task[float]:
            # Its own first word: the engine's prefix cache would otherwise serve a repeat at once
            prompt = f"straggler{n} {STRAGGLER}"
            body = {"model": slow.model, "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": 1, "stream": True}  # fmt: skip
            return asyncio.create_task(_ttft(session, g.url, body, {"x-lanewatch-lane": "slow"}))

        watching = asyncio.create_task(watch())
        start = time.perf_counter()
        shorts: list[asyncio.Task[tuple[bool, float]]] = []
        stragglers: list[asyncio.Task[float]] = []
        pending = list(STRAGGLERS_AT_S)
        i, off = 0, False
        while (now := time.perf_counter() - start) < RUN_S:
            if pending and now >= pending[0]:
                pending.pop(0)
                stragglers.append(straggler(len(stragglers)))
                await asyncio.sleep(0.1)  # its 68 kB reach the engine first: the next two wait behind it
                off = True  # the first without the rescue (it waits longest), the second with it
            shorts.append(short(i, off))
            off = not off
            i += 1
            await asyncio.sleep(EVERY_S)
        got = await asyncio.gather(*shorts)
        blocked = await asyncio.gather(*stragglers)
        await asyncio.sleep(0.5)
        guard.evaluate()
        fired.extend(v.lane for v in guard.views() if v.firing)
        watching.cancel()
    rescued = sorted(t for off, t in got if not off)
    waited = sorted(t for off, t in got if off)
    rescues = dict(g.gw.stats.rescues)
    print(f"straggler: blocked {blocked}; rescue on {rescued[-5:]}; off {waited[-5:]}; {rescues}")
    assert all(t > SLOS["slow"] for t in blocked)  # each straggler's own prefill: seconds
    assert sum(t > SLOS["slow"] for t in waited) >= len(STRAGGLERS_AT_S)  # without the rescue, misses
    assert quantile(rescued, 0.99) <= SLOS["slow"], rescued[-5:]  # with it, the p99 within the SLO
    assert not fired, fired  # and the guard saw no outage
    assert g.gw.stats.rescues[("slow", "fast", "won")] >= len(STRAGGLERS_AT_S)
