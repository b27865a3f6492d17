"""Deterministic records like the demo's: two lanes, three classes, failures, a slowdown, events."""

from __future__ import annotations

import random
from dataclasses import replace

from lanewatch.collector.record.timing import ErrorKind, RequestTiming

T0 = 1_700_000_000.0
CLASSES = {"short": 16, "summary": 64, "story": 256}  # output tokens
FAULT = (60.0, 120.0)  # seconds after T0: the slow lane's queue grows
EVENTS: list[dict[str, object]] = [
    {"t": T0 + 60.0, "kind": "fault_injected", "lane": "slow", "queue_factor": 4},
    {"t": T0 + 75.0, "kind": "alert_firing", "alertname": "LanewatchTTFTBurn"},
    {"t": T0 + 78.0, "kind": "degrade_applied", "action": "shift"},
    {"t": T0 + 120.0, "kind": "fault_cleared", "lane": "slow"},
    {"t": T0 + 140.0, "kind": "alert_resolved", "alertname": "LanewatchTTFTBurn"},
    {"t": T0 + 150.0, "kind": "degrade_restored", "action": "shift"},
]


def sample_records(n: int = 600, seed: int = 7, duration: float = 180.0) -> list[RequestTiming]:
    """n records over `duration` seconds; the slow lane joins server spans, the fast lane does not."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = duration * i / n
        lane = "slow" if i % 2 else "fast"
        cls = rng.choice(list(CLASSES))
        out.append(_record(rng, t, lane, cls))
    return out


def _record(rng: random.Random, t: float, lane: str, cls: str) -> RequestTiming:
    tokens = CLASSES[cls]
    slow = lane == "slow"
    fault = slow and FAULT[0] <= t < FAULT[1]
    queue = rng.uniform(0.3, 0.6) * (4 if fault else 1) if slow else 0.0
    prefill = rng.uniform(0.02, 0.05) * (3 if cls == "summary" else 1)
    per_token = rng.uniform(0.004, 0.006) if slow else rng.uniform(0.002, 0.003)
    cold = rng.random() < 0.1
    dns, connect, tls = (0.001, 0.002, 0.008) if cold else (0.0, 0.0, 0.0)
    send = 0.0004
    ttft = dns + connect + tls + send + queue + prefill + rng.uniform(0.005, 0.02)
    e2e = ttft + per_token * (tokens - 1)
    base = RequestTiming(
        source="probe", target=f"sim-{lane}", lane=lane, request_class=cls, model="sim-model",
        started_at=T0 + t, trace_id=f"{rng.getrandbits(128):032x}",
    )  # fmt: skip
    roll = rng.random()
    if roll < 0.02:
        return replace(base, error=ErrorKind.HTTP_5XX, status=503, dns_s=dns, connect_s=connect)
    if roll < 0.035:
        return replace(base, error=ErrorKind.TTFT_TIMEOUT, status=200, e2e_s=30.0)
    r = replace(
        base, status=200, dns_s=dns, connect_s=connect, tls_s=tls, send_s=send, ttfb_s=ttft * 0.9,
        ttft_s=ttft, e2e_s=e2e, itl_s=tuple(per_token for _ in range(min(tokens - 1, 8))), prompt_tokens=20,
        output_tokens=tokens, tokens_from_usage=True,
    )  # fmt: skip
    return r.with_server_phases(queue, prefill, per_token * (tokens - 1)) if slow else r
