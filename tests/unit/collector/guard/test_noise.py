"""The noise matrix: traffic that must never fire the fast guard, on an injected clock.

Each scenario is a minute of requests on the slow lane (TTFT SLO 2 s), reported as the gateway
reports them (each request under way every tick: its age while it waits, its TTFT once), or as
finished records where a source reports no progress. The guard is evaluated every tick, as it
runs. A sustained breach at the same rates fires, so the harness can tell the two apart.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from lanewatch.collector.guard.alert import GuardAlert
from lanewatch.collector.guard.decide import GuardRule
from lanewatch.collector.guard.guard import FastGuard
from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.record.timing import ErrorKind, RequestTiming

SLO_S = 2.0
TICK_S = 0.1
RUN_S = 60.0
WALL0 = 1_700_000_000.0


@dataclass(frozen=True)
class Request:
    """One request on the slow lane: when it starts, and its TTFT (None: no token within the run)."""

    start: float
    ttft: float | None


def _poisson(rng: random.Random, rate: float, start: float, end: float) -> Iterator[float]:
    t = start
    while True:
        t += rng.expovariate(rate)
        if t >= end:
            return
        yield t


def _good(rng: random.Random, rate: float = 2.0) -> list[Request]:
    return [Request(t, 0.3) for t in _poisson(rng, rate, 0.0, RUN_S)]


def _scenarios() -> dict[str, tuple[list[Request], list[RequestTiming]]]:
    rng = random.Random(7)
    storm = [  # a client's 400s, 50 a second for 10 s, as Envoy's finished records
        _record(Request(t, None), error=ErrorKind.HTTP_4XX, status=400, e2e_s=0.01)
        for t in _poisson(rng, 50.0, 20.0, 30.0)
    ]
    return {
        "a storm of client 4xx beside good traffic": (_good(rng), storm),
        "a single 30 s request beside good traffic": ([*_good(rng), Request(10.0, 30.0)], []),
        "one request every 10 s, all slow": ([Request(t, 5.0) for t in range(0, 60, 10)], []),
        "stalls under the SLO, 4 a second": ([Request(t, 1.9) for t in _poisson(rng, 4.0, 0.0, RUN_S)], []),
        "a gap with no evidence at all": ([r for r in _good(rng) if not 15.0 < r.start < 45.0], []),
    }


_rids = itertools.count(1)


def _record(
    req: Request, error: ErrorKind | None = None, status: int | None = 200, e2e_s: float = 1.0
) -> RequestTiming:
    return RequestTiming(
        request_id=f"r{next(_rids)}",
        source="envoy",
        target="envoy",
        lane="slow",
        request_class="batch",
        model="m",
        started_at=WALL0 + req.start,
        ttft_s=req.ttft,
        e2e_s=e2e_s,
        status=status,
        error=error,
    )


def _run(requests: list[Request], records: list[RequestTiming]) -> list[float]:
    """Run the minute; the times at which the guard had an alert to post."""
    clock = [0.0]
    labels = (("alertname", "LanewatchTTFTMitigation"), ("lane", "slow"), ("slo", "ttft"))
    guard = FastGuard(
        [GuardAlert("slow", "ttft", SLO_S, labels, ())],
        GuardRule(),
        clock=lambda: clock[0],
        wall=lambda: WALL0 + clock[0],
    )
    ids = {id(r): n for n, r in enumerate(requests)}
    pending = sorted(records, key=lambda r: r.started_at)
    fired: list[float] = []
    for step in range(int(RUN_S / TICK_S)):
        now = clock[0] = step * TICK_S
        events = []
        for r in requests:
            if r.start > now:
                continue
            age = now - r.start
            if r.ttft is not None and age >= r.ttft:
                events.append(Progress(ids[id(r)], "slow", r.ttft, True))
            else:
                events.append(Progress(ids[id(r)], "slow", age, False))
        guard.progress("gateway", events)
        while pending and pending[0].started_at - WALL0 <= now:
            guard.record(pending.pop(0))
        if guard.evaluate():
            fired.append(now)
    return fired


@pytest.mark.parametrize("name", list(_scenarios()))
def test_noise_never_fires_the_guard(name: str) -> None:
    requests, records = _scenarios()[name]
    assert _run(requests, records) == [], name


def test_a_sustained_breach_at_those_rates_fires_within_seconds() -> None:
    # 2 requests a second, every one past the SLO from 30 s on: the first is missed at 32.5 s, and
    # the fourth (the floor: 4 judged, 3 missed, more than half) at 34 s
    slow = [Request(n / 2, 3.0 if n / 2 > 30.0 else 0.3) for n in range(int(RUN_S * 2))]
    fired = _run(slow, [])
    assert fired and 32.5 <= fired[0] <= 34.5, fired
