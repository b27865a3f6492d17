"""Records and server series for diagnosis tests: a healthy lane, and one knob per fault."""

from __future__ import annotations

from dataclasses import dataclass, replace

from lanewatch.collector.diagnose import ServerSeries, SloTargets, Value, Window, lanes_from_records
from lanewatch.collector.record.timing import ErrorKind, RequestTiming

T0 = 1_700_000_000.0
CLASSES = {"short": 16, "summary": 64, "story": 256}
SLO = SloTargets(ttft_s=0.5, tpot_s=0.05)


@dataclass(frozen=True)
class Shape:
    """One lane's per-request timings (seconds) and how often things go wrong."""

    queue: float = 0.01
    prefill: float = 0.05
    residual: float = 0.005
    connect: float = 0.0
    tpot: float = 0.02
    fixed_tokens: int | None = None  # every class answers this many tokens (flat work)
    stall_s: float = 0.0  # the first `stall_gaps` gaps after the first token last this long ...
    stall_gaps: int = 5
    stall_every: int = 0  # ... in every n-th request (0: none)
    long_prompt_every: int = 0  # every n-th request has a long prompt that starts with the stall
    error_every: int = 0
    error: ErrorKind = ErrorKind.HTTP_429
    spans: bool = True
    gap_s: float = 0.2  # between request starts
    prompt_tokens: int = 100


def records(
    shape: Shape = Shape(), n: int = 120, lane: str = "slow", start: float = T0
) -> list[RequestTiming]:
    """n records of one lane, classes in turn."""
    out = []
    for i in range(n):
        cls = list(CLASSES)[i % len(CLASSES)]
        out.append(_record(shape, i, lane, cls, start + i * shape.gap_s))
    return out


def _record(s: Shape, i: int, lane: str, cls: str, t: float) -> RequestTiming:
    tokens = s.fixed_tokens or CLASSES[cls]
    base = RequestTiming(
        source="probe", target=f"{lane}-a", lane=lane, request_class=cls, model="m", started_at=t, status=200
    )
    if s.error_every and i % s.error_every == 0:
        return replace(base, status=429 if s.error == ErrorKind.HTTP_429 else 500, error=s.error)
    gaps = [s.tpot] * (tokens - 1)
    if s.stall_every and i % s.stall_every == 0:
        for k in range(1, min(s.stall_gaps + 1, len(gaps))):
            gaps[k] = s.stall_s
    send = 0.001
    ttft = s.connect + send + s.queue + s.prefill + s.residual
    prompt = s.prompt_tokens * 20 if s.long_prompt_every and i % s.long_prompt_every == 1 else s.prompt_tokens
    r = replace(
        base,
        dns_s=0.0,
        connect_s=s.connect,
        tls_s=0.0,
        send_s=send,
        ttfb_s=ttft,
        ttft_s=ttft,
        e2e_s=ttft + sum(gaps),
        itl_s=tuple(gaps),
        prompt_tokens=prompt,
        output_tokens=tokens,
    )
    return r.with_server_phases(s.queue, s.prefill, sum(gaps)) if s.spans else r


HEALTHY_SERVER = ServerSeries(
    running=Value(4, "q running"),
    waiting=Value(0, "q waiting"),
    kv_usage=Value(0.3, "q kv"),
    preemptions_per_s=Value(0, "q preempt"),
    prefix_hit_rate=Value(0.6, "q hits"),
    prefix_caching=Value(1, "q cache_config_info"),
    step_tokens_p90=Value(512, "q steps"),
)


def window(
    shape: Shape = Shape(),
    server: ServerSeries | None = HEALTHY_SERVER,
    slo: SloTargets = SLO,
    n: int = 120,
    lane: str = "slow",
) -> Window:
    """A one-lane window from `records(shape)`, with its server series and SLOs."""
    lanes = lanes_from_records(
        records(shape, n, lane), {lane: slo}, server={lane: server} if server else None
    )
    return Window(lanes)
