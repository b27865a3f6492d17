"""The evidence a diagnosis reads: one window per lane, each value with the computation that made it.

A `Value` is a number and its source (the PromQL query, or the computation over records), so a
finding can show exactly where each signal came from. `None` means the window does not have it;
the check that needs it says `unknown` and names the series (`MISSING` spells each one).
Pure dataclasses: records.py and prometheus.py fill them; the checks only read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lanewatch.exporters import names

__all__ = ["LaneEvidence", "LaneStats", "ServerSeries", "SloTargets", "Value", "Window"]


@dataclass(frozen=True, slots=True)
class Value:
    """One measured number and how it was measured."""

    value: float
    source: str  # a PromQL query, or "records: ..." naming the computation


@dataclass(frozen=True, slots=True)
class SloTargets:
    """A lane's latency SLO thresholds in seconds (None: no such SLO)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None

    def get(self, metric: str) -> float | None:
        """The threshold for ttft | tpot | itl | e2e."""
        return {"ttft": self.ttft_s, "tpot": self.tpot_s, "itl": self.itl_s, "e2e": self.e2e_s}.get(metric)


@dataclass(frozen=True, slots=True)
class LaneStats:
    """What the client-side records (or lanewatch's own series) say about one lane over the window."""

    requests: int = 0
    ok_requests: int = 0
    quantiles: Mapping[str, Value] = field(default_factory=dict)  # "ttft_p99", "itl_p50", ...
    means: Mapping[str, Value] = field(default_factory=dict)  # "ttft", "e2e", "tpot"
    parts: Mapping[str, Value] = field(default_factory=dict)  # mean breakdown part (dns .. decode)
    server_phases: bool = False  # queue and prefill were measured (vLLM spans joined)
    errors: Mapping[str, int] = field(default_factory=dict)  # error kind -> count
    errors_source: str = ""
    class_e2e_means: Mapping[str, float] = field(default_factory=dict)
    class_source: str = ""
    fit_fixed_share: Value | None = None
    # records only: what histograms cannot give
    fluidity: Value | None = None
    stall_share_of_e2e: Value | None = None
    stalls_with_long_prompt: Value | None = None
    new_connections_after_idle: Value | None = None
    idle_gaps: int = 0  # requests that followed an idle gap longer than the keep-alive
    output_tokens_p50: Value | None = None
    output_tokens: tuple[int, ...] = ()  # sorted, ok records only
    prefill_per_prompt_token: Value | None = None  # slope of prefill against prompt tokens

    def quantile(self, name: str) -> Value | None:
        """A stored quantile such as "ttft_p99"."""
        return self.quantiles.get(name)

    def share(self, parts: tuple[str, ...], of: str) -> Value | None:
        """The parts' summed mean over the mean of `of` (ttft | e2e), with its computation."""
        total = self.means.get(of)
        found = [self.parts[p] for p in parts if p in self.parts]
        if total is None or not found or total.value <= 0:
            return None
        value = sum(v.value for v in found) / total.value
        source = f"mean({' + '.join(parts)}) / mean({of})"
        return Value(min(value, 1.0), f"{source}; {found[0].source}")


@dataclass(frozen=True, slots=True)
class ServerSeries:
    """vLLM's own series for the lane's servers over the window; None = the family is missing."""

    running: Value | None = None
    waiting: Value | None = None
    kv_usage: Value | None = None
    preemptions_per_s: Value | None = None
    prefix_hit_rate: Value | None = None
    prefix_caching: Value | None = None  # 1 on, 0 off, from cache_config_info's enable_prefix_caching
    step_tokens_p90: Value | None = None
    spec_acceptance_length: Value | None = None
    finished_per_s: Value | None = None  # requests vLLM finished per second (Little's law's throughput)


# The series each ServerSeries field comes from: what an `unknown` names when the field is None.
MISSING: Mapping[str, str] = {
    "running": names.VLLM_NUM_REQUESTS_RUNNING,
    "waiting": names.VLLM_NUM_REQUESTS_WAITING,
    "kv_usage": names.VLLM_KV_CACHE_USAGE_PERC,
    "preemptions_per_s": names.VLLM_NUM_PREEMPTIONS_TOTAL,
    "prefix_hit_rate": f"{names.VLLM_PREFIX_CACHE_HITS_TOTAL} / {names.VLLM_PREFIX_CACHE_QUERIES_TOTAL}",
    "prefix_caching": names.VLLM_CACHE_CONFIG_INFO,
    "step_tokens_p90": names.VLLM_ITERATION_TOKENS_TOTAL,
    "spec_acceptance_length": (
        f"{names.VLLM_SPEC_DECODE_NUM_ACCEPTED_TOKENS_TOTAL} / {names.VLLM_SPEC_DECODE_NUM_DRAFTS_TOTAL}"
    ),
    "finished_per_s": names.VLLM_REQUEST_SUCCESS_TOTAL,
    "server_phases": "server phases (vLLM's llm_request spans or --enable-per-request-metrics)",
    "itl_gaps": "per-request ITL gaps (a records file)",
    "records": "request records (a records file or lanewatch's request series)",
}


@dataclass(frozen=True, slots=True)
class LaneEvidence:
    """One lane's window: its records' stats, its servers' series and its SLOs."""

    lane: str
    stats: LaneStats
    server: ServerSeries = ServerSeries()
    slo: SloTargets = SloTargets()


@dataclass(frozen=True, slots=True)
class Window:
    """Every lane's evidence over one window, and which lane is the fast one of which pair."""

    lanes: Mapping[str, LaneEvidence]
    pairs: tuple[tuple[str, str], ...] = ()  # (fast, slow)
    span: str | None = None  # the Prometheus range queried ("10m"), None for records alone
    sources: tuple[str, ...] = ()  # "records FILE", "prometheus URL"

    only: tuple[str, ...] = ()  # the lanes to diagnose (empty: all); the others are evidence only

    def slow_name(self, lane: str) -> str | None:
        """The slow lane paired with `lane` when `lane` is a pair's fast lane."""
        return next((s for f, s in self.pairs if f == lane), None)

    @property
    def diagnosed(self) -> tuple[str, ...]:
        """The lanes a diagnosis reports on, in name order."""
        return tuple(sorted(self.only or self.lanes))
