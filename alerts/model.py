"""The SLO spec as frozen dataclasses: what rule generation consumes, apart from any file format.

`spec.py` maps a `lanewatch/v1` document (and `openslo.py` an OpenSLO one) into these.
Durations are whole seconds; objectives are ratios (0.99); `origin` says where in the
source file a part came from, so a later check can name the field and line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from lanewatch.exporters import names

# page and ticket reach people; mitigate reaches only the degrade controller (label action=degrade).
Severity = Literal["page", "ticket", "mitigate"]
LatencyMetric = Literal["ttft", "tpot", "itl", "e2e"]

# The request histogram behind each latency metric an SLO or alert may name.
HISTOGRAMS: Final[dict[str, str]] = {
    "ttft": names.TTFT_SECONDS,
    "tpot": names.TPOT_SECONDS,
    "itl": names.ITL_SECONDS,
    "e2e": names.E2E_SECONDS,
}
# How metric and SLO names read in alert names and text ("ttft" -> "TTFT").
DISPLAY: Final[dict[str, str]] = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E"}


def display_name(name: str) -> str:
    """How an SLO or metric name reads in alert names: ttft -> TTFT, availability -> Availability."""
    return "".join(DISPLAY.get(part, part.capitalize()) for part in name.split("_"))


@dataclass(frozen=True, slots=True)
class WindowPair:
    """A long and a short window that must both burn faster than `factor` × budget."""

    long_s: int
    short_s: int
    factor: float


@dataclass(frozen=True, slots=True)
class BurnPolicy:
    """The window pairs of one severity, OR-ed into one alert per SLO."""

    severity: Severity
    for_s: int
    pairs: tuple[WindowPair, ...]


@dataclass(frozen=True, slots=True)
class Mitigation:
    """Fast alerts that drive the degrade controller: a short window, a high error ratio, no pager."""

    window_s: int  # rate window of the error ratio
    error_ratio: float  # share of requests that missed the SLO over the window, e.g. 0.5
    for_s: int
    interval_s: int  # evaluation interval of the mitigation rule group


@dataclass(frozen=True, slots=True)
class SLO:
    """One objective for one lane: a latency threshold over a histogram, or availability."""

    name: str  # the `slo` label: ttft, tpot, availability, ...
    lane: str
    objective: float  # ratio of good requests, e.g. 0.99
    metric: LatencyMetric | None  # None for availability
    threshold_s: float | None  # latency bound; a bucket bound of the histogram
    selector: tuple[tuple[str, str], ...]  # extra exact label matchers
    exclude_error_kinds: tuple[str, ...]  # availability: error kinds that spend no budget
    description: str
    alert_name: str
    origin: str

    @property
    def error_budget(self) -> float:
        """The allowed ratio of bad requests (1 - objective), rounded clear of float noise."""
        return round(1.0 - self.objective, 12)

    @property
    def slug(self) -> str:
        """The SLO's id in rule group names: <lane>-<name>."""
        return f"{self.lane}-{self.name}"


@dataclass(frozen=True, slots=True)
class QuantileAlert:
    """A latency quantile per lane over its limit for a while (e.g. P99 TTFT > 0.5 s for 5m)."""

    metric: LatencyMetric
    lane: str
    quantile: float
    limit_s: float
    for_s: int
    severity: Severity
    origin: str


@dataclass(frozen=True, slots=True)
class Check:
    """A value above a limit for a while: probe failure ratio, waiting requests, KV cache, preemptions."""

    above: float
    for_s: int
    severity: Severity


@dataclass(frozen=True, slots=True)
class Down:
    """A scrape that fails for a while; `jobs` is a regex over Prometheus' job label ("" = n/a)."""

    for_s: int
    severity: Severity
    jobs: str = ""


@dataclass(frozen=True, slots=True)
class Convergence:
    """The fast lane's P99 TTFT at or above `ratio` × the slow lane's for a while."""

    fast: str
    slow: str
    ratio: float
    for_s: int
    severity: Severity
    origin: str


@dataclass(frozen=True, slots=True)
class Flatness:
    """CV of mean E2E across request classes below `max_cv` while traffic flows."""

    max_cv: float
    min_classes: int
    min_rate: float  # requests per second per lane, below which no alert
    for_s: int
    severity: Severity


@dataclass(frozen=True, slots=True)
class Links:
    """Where alerts point: a runbook URL template ({alert}, {anchor}) and Grafana's base URL."""

    runbook: str
    grafana: str


@dataclass(frozen=True, slots=True)
class Spec:
    """A whole SLO spec, ready for rule generation."""

    name: str
    source: str
    period_s: int
    analysis_window_s: int  # rate window of quantile, convergence, flatness, saturation rules
    evaluation_interval_s: int | None
    burn: tuple[BurnPolicy, ...]
    slos: tuple[SLO, ...]
    links: Links
    mitigation: Mitigation | None = None
    latency_alerts: tuple[QuantileAlert, ...] = ()
    probe_failures: Check | None = None
    target_down: Down | None = None
    component_down: Down | None = None
    controller_no_leader: Down | None = None
    router_unsynced: Down | None = None
    convergence: tuple[Convergence, ...] = ()
    flatness: Flatness | None = None
    waiting_requests: Check | None = None
    kv_cache_usage: Check | None = None
    preemptions: Check | None = None


def lane_ttft_thresholds(spec: Spec) -> dict[str, float]:
    """Each lane's TTFT SLO threshold, for a request of any class: the SLOs without a selector, the
    tighter of two on one lane (the fast guard and the gateway's rescue judge a lane by it)."""
    out: dict[str, float] = {}
    for slo in spec.slos:
        if slo.metric == "ttft" and slo.threshold_s is not None and not slo.selector:
            out[slo.lane] = min(out.get(slo.lane, slo.threshold_s), slo.threshold_s)
    return out
