"""The rescue of a late request, through a real gateway in front of two `lanewatch sim` lanes.

The slow lane's TTFT SLO is 2 s and the fast lane's 0.5 s, as in the default spec. A fault delays
the slow lane's queue; a streamed request there that has no first token by its deadline is sent
again to the fast lane, and the client gets one answer from whichever lane produced the first token
first. Each case checks what the client saw, the record, the counters and what the engines did.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from lanewatch.collector.degrade_state.state import LaneDegrade
from tests.servers import SimHandle, start_simulator

from .gateway_harness import TRUST_LOOPBACK, RunningGateway, eventually, gateway_server

pytestmark = pytest.mark.integration

SLOS = {"fast": 0.5, "slow": 2.0}


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimHandle, SimHandle]]:
    tmp = tmp_path_factory.mktemp("sims")
    with start_simulator(tmp, profile="fast") as fast, start_simulator(tmp, profile="slow") as slow:
        yield fast, slow


def _fault(sim: SimHandle, **fault: Any) -> None:
    with sim.client() as c:
        if fault:
            c.post("/admin/faults", json=fault, headers=sim.admin_headers).raise_for_status()
        else:
            c.delete("/admin/faults", headers=sim.admin_headers).raise_for_status()


@asynccontextmanager
async def _gateway(sims: tuple[SimHandle, SimHandle], **rescue: Any) -> AsyncIterator[RunningGateway]:
    fast, slow = sims
    lanes = {
        "fast": {"upstreams": [fast.url], "models": [fast.model]},
        "slow": {"upstreams": [slow.url], "models": [slow.model]},
    }
    async with gateway_server(
        lanes, ttft_slos=SLOS, lane_order=["fast", "slow"], hints=TRUST_LOOPBACK, rescue=rescue
    ) as g:
        yield g


async def _ask(
    g: RunningGateway,
    model: str,
    lane: str = "slow",
    stream: bool = True,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One chat completion on `lane`: its headers, first content time, content events and [DONE]."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say something"}],
        "max_tokens": 8,
        "stream": stream,
        "ignore_eos": True,
    }
    t0 = time.monotonic()
    first: float | None = None
    contents = 0
    done = False
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            f"{g.url}/v1/chat/completions", json=body, headers={"x-lanewatch-lane": lane, **(headers or {})}
        ) as r,
    ):
        raw = b""
        async for data in r.content.iter_any():
            raw += data
            if first is None and b'"content":"' in raw.replace(b'"content":""', b""):
                first = time.monotonic() - t0
        for event in raw.split(b"\n\n"):
            if event.startswith(b"data: [DONE]"):
                done = True
            elif b'"content":"' in event and b'"content":""' not in event:
                contents += 1
        return {
            "status": r.status,
            "headers": dict(r.headers),
            "ttft": first,
            "contents": contents,
            "done": done,
            "raw": raw,
        }


async def _truth(sim: SimHandle, request_id: str | None) -> dict[str, Any]:
    """The engine's account of a request, once it has ended there (an abort ends at its next step)."""
    assert request_id is not None
    for _ in range(50):
        with sim.client() as c:
            r = c.get(f"/debug/requests/{request_id}")
        if r.status_code == 200:
            found: dict[str, Any] = r.json()
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"{sim.url} has no account of {request_id}")


async def _records(g: RunningGateway, n: int) -> None:
    assert await eventually(lambda: len(g.records) >= n, within_s=5.0), g.records


async def test_a_late_request_is_answered_by_the_faster_lane_and_the_late_lane_still_misses(
    sims: tuple[SimHandle, SimHandle],
) -> None:
    fast, slow = sims
    _fault(slow, queue_delay_s=3.0)
    try:
        async with _gateway(sims) as g:
            got = await _ask(g, slow.model, headers={"x-request-id": "rescued-1"})
            await _records(g, 1)
            events = g.gw.in_flight.report(time.perf_counter())
    finally:
        _fault(slow)
    assert got["status"] == 200 and got["done"] and got["contents"] == 8, got
    assert got["headers"]["x-lanewatch-lane"] == "fast"
    assert got["headers"]["x-lanewatch-rescued-from"] == "slow"
    assert got["ttft"] is not None and got["ttft"] < SLOS["slow"], got  # the client met the SLO
    assert got["raw"].count(b"data: [DONE]") == 1 and got["raw"].count(b'"role":"assistant"') == 1
    (record,) = g.records
    assert (record.lane, record.late_lane, record.error) == ("fast", "slow", None)
    assert record.rescue_sent_s is not None and 1.0 < record.rescue_sent_s < SLOS["slow"]
    # the slow attempt had no first token: it was given up just past the slow lane's SLO, a miss
    assert record.late_wait_s is not None and SLOS["slow"] <= record.late_wait_s < 3.0
    assert record.own_ttft_s is not None and record.own_ttft_s < SLOS["fast"]  # the fast lane's own
    assert record.late_ttft == ("slow", record.late_wait_s)
    assert g.gw.stats.rescues == {("slow", "fast", "won"): 1}
    # The guard's evidence: the slow lane missed (its last age past 2 s), the fast lane met.
    slow_events = [e for e in events if e.lane == "slow"]
    fast_events = [e for e in events if e.lane == "fast"]
    assert [e.first_token for e in slow_events] == [False] and slow_events[0].age_s > SLOS["slow"]
    assert [e.first_token for e in fast_events] == [True] and fast_events[0].age_s < SLOS["fast"]
    # Both engines saw the request; the slow one's was aborted before any token.
    assert record.request_id == "rescued-1"
    assert (await _truth(fast, record.request_id))["output_tokens"] == 8
    truth = await _truth(slow, record.request_id)
    assert truth["output_tokens"] == 0 and truth["finished_reason"] == "abort", truth


async def test_requests_the_policy_never_rescues_wait_on_their_lane(
    sims: tuple[SimHandle, SimHandle],
) -> None:
    _, slow = sims
    _fault(slow, queue_delay_s=2.5)
    try:
        async with _gateway(sims) as g:
            asked = await asyncio.gather(
                _ask(g, slow.model, headers={"x-lanewatch-rescue": "off"}),
                _ask(g, slow.model, headers={"x-lanewatch-class": "batch"}),
                _ask(g, slow.model, stream=False),
            )
            await _records(g, 3)
    finally:
        _fault(slow)
    for got in asked:
        assert got["status"] == 200 and got["headers"]["x-lanewatch-lane"] == "slow", got
        assert "x-lanewatch-rescued-from" not in got["headers"]
    assert all(r.lane == "slow" and r.late_lane is None for r in g.records), g.records
    assert not g.gw.stats.rescues


async def test_the_bucket_and_a_degraded_target_decline_rescues(sims: tuple[SimHandle, SimHandle]) -> None:
    _, slow = sims
    _fault(slow, queue_delay_s=2.5)
    try:
        async with _gateway(sims, max_tokens=1, token_ratio=0.01) as g:
            both = await asyncio.gather(_ask(g, slow.model), _ask(g, slow.model))
            lanes = sorted(got["headers"]["x-lanewatch-lane"] for got in both)
            g.gw.set_degrade({"fast": LaneDegrade(shift_to="slow", shift_percent=100)})
            shifted_away = await _ask(g, slow.model)
            await _records(g, 3)
    finally:
        _fault(slow)
    assert lanes == ["fast", "slow"]  # one token: one rescue, the other waited
    assert shifted_away["headers"]["x-lanewatch-lane"] == "slow"
    assert g.gw.stats.rescues == {
        ("slow", "fast", "won"): 1,
        ("slow", "fast", "throttled"): 1,
        ("slow", "fast", "target_degraded"): 1,
    }
    declined = [r for r in g.records if r.lane == "slow"]
    assert len(declined) == 2 and all(r.ttft_s is not None and r.ttft_s > 2.5 for r in declined)


async def test_a_rescue_that_loses_is_cancelled_and_the_late_lane_answers(
    sims: tuple[SimHandle, SimHandle],
) -> None:
    fast, slow = sims
    # Deadline: 2.0 - 0.5 (the fast lane's SLO, with no TTFT of its own yet) - 0.25 = 1.25 s. The slow
    # lane's first token comes at about 1.7 s; the rescue's not before 1.25 + 1.0 s.
    _fault(slow, queue_delay_s=1.7)
    _fault(fast, queue_delay_s=1.0)
    try:
        async with _gateway(sims) as g:
            got = await _ask(g, slow.model, headers={"x-request-id": "rescue-lost-1"})
            await _records(g, 1)
    finally:
        _fault(slow)
        _fault(fast)
    assert got["headers"]["x-lanewatch-lane"] == "slow" and "x-lanewatch-rescued-from" not in got["headers"]
    assert got["contents"] == 8 and got["done"]
    (record,) = g.records
    assert (record.lane, record.late_lane, record.late_wait_s) == ("slow", "slow", None)
    assert record.own_ttft_s == record.ttft_s and record.late_ttft is None
    assert g.gw.stats.rescues == {("slow", "fast", "lost"): 1}
    truth = await _truth(fast, record.request_id)
    assert truth["output_tokens"] == 0 and truth["finished_reason"] == "abort", truth


async def test_with_the_faster_lane_saturated_too_rescues_stop_within_the_bucket(
    sims: tuple[SimHandle, SimHandle],
) -> None:
    fast, slow = sims
    # Both lanes late: the slow lane past its 2 s SLO, the fast one past its 0.5 s. Rescues go out while
    # the bucket lasts and until the fast lane's own attempts show it over its SLO; then none.
    _fault(slow, queue_delay_s=3.0)
    _fault(fast, queue_delay_s=1.2)
    sent = 30
    try:
        async with _gateway(sims, max_tokens=4) as g:
            waves = []
            for _ in range(sent // 5):
                waves.append(asyncio.gather(*(_ask(g, slow.model) for _ in range(5))))
                await asyncio.sleep(0.6)
            answers = [got for wave in waves for got in await wave]
            await _records(g, sent)
    finally:
        _fault(slow)
        _fault(fast)
    rescues = g.gw.stats.rescues
    out = sum(n for (_, _, outcome), n in rescues.items() if outcome in ("won", "lost", "failed"))
    bound = 4 + 0.05 * sent  # the bucket's size, and what the requests earned it
    assert 1 <= out <= bound, rescues
    assert (
        rescues[("slow", "fast", "throttled")] + rescues[("slow", "fast", "target_over_slo")] >= sent - bound
    )
    assert all(got["status"] == 200 and got["done"] for got in answers)  # declined ones wait and are served
