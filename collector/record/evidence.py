"""The evidence types beside the records that every room reads: a request's server span, a
server's stats over the window, a GPU sample. Pure data: the collect service's OTLP decoder,
scraper and NVML sampler make them; the join, the exporters and the diagnosis read them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lanewatch.collector.record.plausible import MAX_DURATION_S, count_problem
from lanewatch.collector.record.rules import bad_duration

__all__ = ["GpuSample", "ServerSpan", "ServerStats", "span_problem"]


@dataclass(frozen=True, slots=True)
class ServerSpan:
    """The server-side phases of one request, as vLLM's `llm_request` span reports them."""

    trace_id: str  # 32 lowercase hex digits
    queue_s: float
    prefill_s: float
    decode_s: float
    request_id: str | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    parent_span_id: str | None = None  # 16 lowercase hex digits: the span the request came in under
    sender: str = ""  # who sent it: "<peer host>/<resource service.name>" (the join's fairness key)


def span_problem(span: ServerSpan) -> str | None:
    """Why no record may take this span's times (NaN, infinite, negative, past any request's length)
    or token counts (negative, past what one request holds: record/plausible.py's bounds), or None."""
    for name in ("queue_s", "prefill_s", "decode_s", "ttft_s", "e2e_s"):
        value = getattr(span, name)
        if bad_duration(value):
            return f"{name.removesuffix('_s')} is not a finite, non-negative number of seconds"
        if value is not None and value > MAX_DURATION_S:
            return f"{name.removesuffix('_s')} is longer than any request ({MAX_DURATION_S:.0f} s)"
    for name in ("prompt_tokens", "completion_tokens"):
        if (why := count_problem(getattr(span, name))) is not None:
            return f"{name}: {why}"
    return None


@dataclass(frozen=True, slots=True)
class ServerStats:
    """What one target's vLLM reports over the window, ready to export."""

    target: str
    lane: str
    up: bool
    scrape_errors: int  # failed scrapes since start
    scrape_duration_s: float | None
    phase_quantiles: Mapping[str, Mapping[float, float]]  # phase → quantile → seconds
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    prefix_cache_hit_ratio: float | None = None
    spec_decode_acceptance_ratio: float | None = None
    preemptions: float = 0.0  # preemptions seen since start (reset-aware)
    # Families lanewatch reads that the last good page lacked under every name (current names).
    missing_families: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one moment; None where the GPU or driver does not report a value."""

    index: int
    uuid: str
    name: str
    utilization_ratio: float | None = None  # share of time a kernel ran, 0..1
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    power_watts: float | None = None
    temperature_celsius: float | None = None
    sm_clock_hertz: float | None = None
    memory_clock_hertz: float | None = None
    hbm_bandwidth_peak_bytes_per_second: float | None = None
    dram_bandwidth_utilization_ratio: float | None = None  # GPM, 0..1

    def to_json(self) -> dict[str, Any]:
        """The sample as a JSON-ready dict."""
        return dataclasses.asdict(self)
