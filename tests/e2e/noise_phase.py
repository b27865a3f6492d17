"""The fast guard's noise matrix on real components: two minutes of what real clients do, with no
fault, fire nothing.

Shared by the fast guard's e2e tests (through the gateway and behind Envoy). The traffic is the
demo's mix with noise: half of it asks for whole answers (no stream: no first token to judge),
10 % of the clients hold their body for 1.5 s (an upload is not the lane's wait), 5 % leave early,
and every 30 s a burst of client 4xx. None of it says a lane is slow, so the guard posts no
alert and the controller fires nothing, while it still judges the streamed requests (a guard
that judged nothing would pass this vacuously).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx

from lanewatch.collector.common.headers import LANE_HEADER
from lanewatch.collector.demo import Stack
from lanewatch.collector.demo.configs import MODEL
from lanewatch.collector.demo.traffic import Noise
from lanewatch.exporters.names import (
    GATEWAY_REQUESTS_TOTAL,
    GATEWAY_RESCUES_TOTAL,
    GUARD_ALERT_POSTS_TOTAL,
    GUARD_FIRING,
    GUARD_VERDICTS_TOTAL,
)
from tests.e2e.fault_trials import audit_of

__all__ = [
    "NOISE",
    "PROBE_OVERLAP",
    "QUIET_S",
    "QuietFigures",
    "client_error_burst",
    "guard_sample",
    "quiet_phase",
    "ttft_firings",
]

NOISE = Noise(non_streamed=0.5, slow_upload=0.1, upload_s=1.5, disconnect=0.05, disconnect_after_s=0.5)
TTFT_MITIGATION = "LanewatchTTFTMitigation"  # the guard fires it, with the rules' labels
QUIET_S = 120.0
# With half the traffic unstreamed, the guard's evidence on the slow lane is about one streamed
# request a second, and the probes: one probe of a lane and class at a time is sent once per
# answer under the 3 s fault, four at once (`probe.overlap`) every second. Behind Envoy, whose
# entries reach the collector in batches, one at a time put the median shift at 4.65 s on an idle
# machine, four at once at 3.94 s. The extra ones run only while every probe of the class still
# waits for its first token, so the healthy slow lane's load (and its TPOT, 39 ms median against
# its 50 ms SLO) is one probe's. Through the gateway, which reports every 0.1 s, one at a time
# keeps the median near 3 s.
PROBE_OVERLAP = 4
BURST_EVERY_S = 30.0
BURST_S = 5.0
# 50 a second: 25 times the slow lane's streamed traffic, so a guard or rule that counted them
# would see little else. As fast as one client can send (about 550 a second here) the burst was
# a load test instead: the router, the collector and the simulated engines share this machine's
# cores, and the engines' steps, which run in real time, ran late.
BURST_RATE_PER_S = 50.0
MIN_CLIENT_ERRORS = 100  # 4 bursts of 250 planned: fewer than this and the phase tested little


@dataclass(frozen=True)
class QuietFigures:
    """What the quiet phase saw: the guard's verdicts and posts, the controller's firings, the 4xx."""

    met: float
    missed: float
    posts: float
    fired: list[dict[str, Any]]
    client_errors: int
    requests: float = 0.0  # the gateway's, routed to any lane
    rescues: float = 0.0  # second attempts the gateway sent (won, lost or failed)


async def guard_metrics(collector_url: str) -> str:
    """The collector's /metrics text."""
    async with httpx.AsyncClient(timeout=5.0) as client:
        return (await client.get(f"{collector_url}/metrics")).text


def guard_sample(text: str, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        series, value = line.rsplit(" ", 1)
        if all(f'{k}="{v}"' in series for k, v in labels.items()):
            total += float(value)
    return total


async def client_error_burst(
    traffic_url: str, seconds: float, lane: str = "slow", rate_per_s: float = BURST_RATE_PER_S
) -> int:
    """Requests the server refuses as the client's mistake (max_tokens 0: a 400), `rate_per_s` of
    them a second (one client, one at a time), for `seconds`."""
    sent = 0
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}
    start = time.monotonic()
    deadline = start + seconds
    async with httpx.AsyncClient(base_url=traffic_url, timeout=5.0) as client:
        while time.monotonic() < deadline:
            r = await client.post("/v1/chat/completions", json=body, headers={LANE_HEADER: lane})
            assert 400 <= r.status_code < 500, (r.status_code, r.text)
            sent += 1
            await asyncio.sleep(max(start + sent / rate_per_s - time.monotonic(), 0.0))
    return sent


async def quiet_phase(
    stack: Stack, traffic_url: str, audit_since: float, seconds: float = QUIET_S
) -> QuietFigures:
    """Run `seconds` of noisy traffic (already flowing) plus 4xx bursts; what the guard saw, and
    the controller's firings since `audit_since` (Unix)."""
    collector = stack.layout.collector_url
    before = await guard_metrics(collector)
    gateway_before = await guard_metrics(traffic_url)
    errors = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        errors += await client_error_burst(traffic_url, min(BURST_S, max(deadline - time.monotonic(), 0.0)))
        await asyncio.sleep(min(BURST_EVERY_S - BURST_S, max(deadline - time.monotonic(), 0.0)))
    after = await guard_metrics(collector)
    gateway_after = await guard_metrics(traffic_url)
    assert errors >= MIN_CLIENT_ERRORS, f"only {errors} client errors sent"

    def sent(text: str) -> tuple[float, float]:
        rescues = sum(guard_sample(text, GATEWAY_RESCUES_TOTAL, outcome=o) for o in ("won", "lost", "failed"))
        return guard_sample(text, GATEWAY_REQUESTS_TOTAL), rescues

    def delta(name: str, **labels: str) -> float:
        return guard_sample(after, name, **labels) - guard_sample(before, name, **labels)

    fired = [e for e in audit_of(stack) if e["event"] == "fired" and e["at"] > audit_since]
    assert guard_sample(after, GUARD_FIRING) == 0.0, "a lane's guard is firing after the quiet phase"
    return QuietFigures(
        met=delta(GUARD_VERDICTS_TOTAL, verdict="met"),
        missed=delta(GUARD_VERDICTS_TOTAL, verdict="missed"),
        posts=delta(GUARD_ALERT_POSTS_TOTAL),
        fired=fired,
        client_errors=errors,
        requests=sent(gateway_after)[0] - sent(gateway_before)[0],
        rescues=sent(gateway_after)[1] - sent(gateway_before)[1],
    )


def ttft_firings(audit: list[dict[str, Any]], lane: str = "slow") -> list[dict[str, Any]]:
    """The controller's `fired` entries of `lane`'s TTFT mitigation alert (from the guard or the
    rules): who caught each sustained TTFT breach. The faults' backlog, released at once when a
    fault clears, can also breach the slow lane's TPOT SLO, which only the rules judge."""
    return [
        e
        for e in audit
        if e["event"] == "fired" and e["lane"] == lane and e["detail"].get("alertname") == TTFT_MITIGATION
    ]
