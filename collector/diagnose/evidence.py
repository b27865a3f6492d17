"""The evidence a diagnosis reads: one window per lane, each value with the computation that made it.

A `Value` is a number and its source (the PromQL query, or the computation over records), so a
finding can show exactly where each signal came from. `None` means the window does not have it;
the check that needs it says `unknown` and names the series (`MISSING` spells each one).
Pure dataclasses: records.py and prometheus.py fill them; the checks only read them.

`EVIDENCE` names every piece of evidence a check may declare in its `needs` (it cannot judge
without it) or `reads` (it uses it when there): each key says what an `unknown` names when the
lane lacks it, and whether only vLLM's series in Prometheus can give it. The runner turns an
unmet need into the check's `unknown`; the gather step asks Prometheus only for the keys the
enabled checks declare.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import TypeVar

from lanewatch.collector.diagnose.thresholds import Thresholds
from lanewatch.collector.record.window import coefficient_of_variation
from lanewatch.exporters import names

__all__ = [
    "EVIDENCE",
    "SERVER_KEYS",
    "EvidenceKey",
    "Gap",
    "LaneEvidence",
    "LaneStats",
    "Missing",
    "Need",
    "ServerSeries",
    "SloTargets",
    "Value",
    "Window",
    "flat_keys",
    "need",
]


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
    # cached / prompt tokens the responses' usage reported (None: no record reported cached tokens)
    cached_prompt_share: Value | None = None

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
    "breakdown": "request records (a records file or lanewatch's request series)",  # of ok requests
    "tpot_slo": "TPOT SLO and TPOT quantile",
    "work_fit": "two request classes and the E2E fit (records)",
    "pair": "TTFT P99 of both lanes",
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


@dataclass(frozen=True, slots=True)
class Gap:
    """What a lane lacks for one key: the series or data an `unknown` names, and why when that says more.

    A gap with a `why` means the lane cannot be judged at all (too few requests): it is named alone.
    """

    series: str
    why: str = ""


Absent = Callable[[LaneEvidence, Window, Thresholds], Gap | None]


@dataclass(frozen=True, slots=True)
class EvidenceKey:
    """One piece of evidence a check may need: what it is, where it comes from, and how it is missed."""

    key: str
    label: str  # what an `unknown` names when the lane lacks it
    prometheus: bool  # only vLLM's series in Prometheus give it (a records file never does)
    absent: Absent  # the gap for one lane, None when the lane has it

    def gap(self, lane: LaneEvidence, window: Window, t: Thresholds) -> Gap:
        """The lane's gap for this key, its plain label when the lane seems to have it."""
        return self.absent(lane, window, t) or Gap(self.label)


def _series_key(name: str) -> EvidenceKey:
    label = MISSING[name]
    return EvidenceKey(
        name, label, True, lambda lane, w, t: Gap(label) if getattr(lane.server, name) is None else None
    )


def _stats_key(name: str, absent: Callable[[LaneEvidence, Window, Thresholds], bool]) -> EvidenceKey:
    label = MISSING[name]
    return EvidenceKey(name, label, False, lambda lane, w, t: Gap(label) if absent(lane, w, t) else None)


def _min_requests(lane: LaneEvidence, window: Window, t: Thresholds) -> Gap | None:
    n = lane.stats.requests
    if n >= t.min_requests:
        return None
    return Gap(MISSING["records"], f"cannot judge: {n} requests in the window, {t.min_requests} needed")


def _no_breakdown(lane: LaneEvidence, window: Window, t: Thresholds) -> bool:
    means = lane.stats.means
    return not lane.stats.parts or any(m not in means or means[m].value <= 0 for m in ("ttft", "e2e"))


def _no_itl(lane: LaneEvidence, window: Window, t: Thresholds) -> bool:
    p50, p99 = lane.stats.quantile("itl_p50"), lane.stats.quantile("itl_p99")
    return p50 is None or p99 is None or p50.value <= 0


def _stall_overlap(lane: LaneEvidence, window: Window, t: Thresholds) -> Gap | None:
    if lane.stats.stalls_with_long_prompt is not None:
        return None
    return Gap(MISSING["itl_gaps"], "decodes stall; the records to line stalls up are missing")


def _no_tpot_slo(lane: LaneEvidence, window: Window, t: Thresholds) -> bool:
    quantile = lane.stats.quantile(f"tpot_p{round(t.slo_quantile * 100)}")
    return quantile is None or lane.slo.tpot_s is None


def _no_work_fit(lane: LaneEvidence, window: Window, t: Thresholds) -> bool:
    st = lane.stats
    return coefficient_of_variation(list(st.class_e2e_means.values())) is None or st.fit_fixed_share is None


def _pair(lane: LaneEvidence, window: Window, t: Thresholds) -> Gap | None:
    slow_name = window.slow_name(lane.lane)
    if slow_name is None:  # not a fast lane: nothing to compare
        return None
    slow = window.lanes.get(slow_name)
    if slow is None:
        return Gap(f"the {slow_name} lane's evidence")
    fast_p99, slow_p99 = lane.stats.quantile("ttft_p99"), slow.stats.quantile("ttft_p99")
    if fast_p99 is None or slow_p99 is None or slow_p99.value <= 0:
        return Gap(MISSING["pair"])
    return None


SERVER_KEYS: tuple[str, ...] = tuple(f.name for f in fields(ServerSeries))

# Every key a check may declare, in the order the docs list them.
EVIDENCE: Mapping[str, EvidenceKey] = {
    k.key: k
    for k in (
        _stats_key("records", lambda lane, w, t: lane.stats.requests == 0),
        EvidenceKey("min_requests", MISSING["records"], False, _min_requests),
        _stats_key("breakdown", _no_breakdown),
        _stats_key("server_phases", lambda lane, w, t: not lane.stats.server_phases),
        _stats_key("itl_gaps", _no_itl),
        EvidenceKey("stall_overlap", MISSING["itl_gaps"], False, _stall_overlap),
        _stats_key("tpot_slo", _no_tpot_slo),
        _stats_key("work_fit", _no_work_fit),
        EvidenceKey("pair", MISSING["pair"], False, _pair),
        *(_series_key(name) for name in SERVER_KEYS),
    )
}

# A check's need: one key, or a tuple of keys any one of which will do.
Need = str | tuple[str, ...]


def flat_keys(needs: Iterable[Need]) -> tuple[str, ...]:
    """Every key the needs name, in order, alternatives included."""
    return tuple(k for n in needs for k in ((n,) if isinstance(n, str) else n))


class Missing(Exception):  # raised for control flow, caught by the runner
    """A check found a key it needs missing while it ran: the runner turns it into `unknown`."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


_T = TypeVar("_T")


def need(value: _T | None, key: str) -> _T:
    """`value`, or Missing(key) when it is None: the check says `unknown`, naming the key's series."""
    if value is None:
        raise Missing(key)
    return value
