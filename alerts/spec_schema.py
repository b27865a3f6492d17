"""The SLO spec's YAML schema: the versioned document's pydantic models, field by field (the spec
and alerts/windows.yaml). docs/slo-spec.md is generated from them (specdoc.py); spec.py loads a
document through them and maps it into `model.Spec`."""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from lanewatch.collector.common.validation import LaneName, repeats
from lanewatch.collector.record.error_kinds import CLIENT_ERROR_KINDS, METRIC_ERROR_KINDS
from lanewatch.exporters import names

from .duration import parse_duration

DEFAULT_RUNBOOK: Final = "https://github.com/lanewatch/lanewatch/blob/main/docs/runbooks.md#{anchor}"


def _duration(value: str) -> str:
    parse_duration(value)
    return value


def _for(value: str) -> str:
    parse_duration(value, allow_zero=True)
    return value


def seconds_of(value: str) -> int:
    """Seconds of a `for` duration (zero allowed)."""
    return parse_duration(value, allow_zero=True)


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    return value


Duration = Annotated[str, AfterValidator(_duration)]
For = Annotated[str, AfterValidator(_for)]  # how long a condition must hold; "0s" allowed
SloName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
Severity = Literal["page", "ticket"]
Metric = Literal["ttft", "tpot", "itl", "e2e"]


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, use_attribute_docstrings=True
    )


# ---------------------------------------------------------------- burn-rate windows
class WindowPairModel(_Model):
    """Two windows that must both burn; the factor is explicit or derived from a budget share."""

    long: Duration
    """The long window: the error ratio over it must exceed the factor × budget."""
    short: Duration
    """The short window, shorter than `long`: it makes the alert reset soon after the burn stops."""
    budget_percent: float | None = Field(default=None, gt=0, le=100)
    """Percent of the period's error budget spent before firing; factor = budget% × period / long window."""
    factor: float | None = Field(default=None, gt=0)
    """The burn-rate factor itself, instead of `budgetPercent`."""

    @model_validator(mode="after")
    def _one_factor(self) -> WindowPairModel:
        if (self.budget_percent is None) == (self.factor is None):
            raise ValueError("give exactly one of budgetPercent and factor")
        if parse_duration(self.short) >= parse_duration(self.long):
            raise ValueError(f"short window {self.short} must be shorter than long window {self.long}")
        return self


class SeverityWindowsModel(_Model):
    """The window pairs OR-ed into one alert of a severity."""

    for_: For = Field(default="0s", alias="for")
    """How long a pair's condition must hold before the alert fires."""
    pairs: list[WindowPairModel] = Field(min_length=1)
    """Window pairs, OR-ed into one alert of this severity."""


class MitigationModel(_Model):
    """Mitigation alerts: the error ratio over one short window, evaluated in a group of its own."""

    window: Duration
    """Rate window of the error ratio; at least two `interval`s."""
    error_ratio: float = Field(gt=0, lt=1)
    """Fire above this share of bad requests (0–1), above every SLO's error budget."""
    for_: For = Field(default="0s", alias="for")
    """How long the ratio must stay above `errorRatio`."""
    interval: Duration = "5s"
    """Evaluation interval of the mitigation rule group."""

    @model_validator(mode="after")
    def _window_spans_evaluations(self) -> MitigationModel:
        if parse_duration(self.window) < 2 * parse_duration(self.interval):
            raise ValueError(f"window {self.window} must span at least two intervals of {self.interval}")
        return self


class WindowSetModel(_Model):
    """Windows per severity; at least one of page and ticket. `mitigate` adds degrade-only alerts."""

    page: SeverityWindowsModel | None = None
    """Windows of the page alerts."""
    ticket: SeverityWindowsModel | None = None
    """Windows of the ticket alerts."""
    mitigate: MitigationModel | None = None
    """Mitigation alerts for the degrade controller; absent = none."""

    @model_validator(mode="after")
    def _some(self) -> WindowSetModel:
        if self.page is None and self.ticket is None:
            raise ValueError("declare page or ticket windows (or both)")
        return self


class WindowsFileModel(_Model):
    """alerts/windows.yaml: named window sets."""

    api_version: Literal["lanewatch/v1"]
    """Always `lanewatch/v1`."""
    kind: Literal["BurnRateWindows"]
    """Always `BurnRateWindows`."""
    sets: dict[str, WindowSetModel]
    """Window sets by name, chosen by a spec's `windows`."""


# ---------------------------------------------------------------- SLOs
class LatencySLIModel(_Model):
    """Good = requests whose `metric` is at most `threshold` seconds (a histogram bucket bound)."""

    metric: Metric
    """The request latency judged."""
    threshold: float = Field(gt=0)
    """Seconds; must be a bucket bound of the metric's histogram."""


class AvailabilitySLIModel(_Model):
    """Good = requests that finished without an error of a counted kind."""

    count_error_kinds: list[str] | None = None
    # A client's bad parameter, unknown model or too-large body must not spend the lane's budget,
    # or any client could trigger a degrade (docs/slo.md).
    """Error kinds that count as bad; null: all but `http_400`, `http_404`, `http_413`, `http_422`."""
    exclude_error_kinds: list[str] = Field(default_factory=list)
    """Error kinds not counted either, e.g. `client_disconnect`."""

    @model_validator(mode="after")
    def _known_kinds(self) -> AvailabilitySLIModel:
        known = set(METRIC_ERROR_KINDS)
        unknown = sorted({*self.exclude_error_kinds, *(self.count_error_kinds or ())} - known)
        if unknown:
            raise ValueError(f"unknown error kinds {unknown}; known: {', '.join(sorted(known))}")
        return self

    def uncounted(self) -> tuple[str, ...]:
        """Every error kind that does not count as bad, sorted."""
        counted = DEFAULT_COUNTED if self.count_error_kinds is None else self.count_error_kinds
        return tuple(sorted((set(METRIC_ERROR_KINDS) - set(counted)) | set(self.exclude_error_kinds)))


DEFAULT_COUNTED: Final = tuple(k for k in METRIC_ERROR_KINDS if k not in CLIENT_ERROR_KINDS)


class SLOModel(_Model):
    """One objective, applied to each of `lanes`."""

    name: SloName
    """The `slo` label and the alert's display name."""
    lanes: list[LaneName] = Field(min_length=1)
    """One SLO per lane listed."""
    objective: float = Field(gt=0, lt=100)
    """Percent of good requests, e.g. 99 or 99.9."""
    description: str = ""
    """Free text for people."""
    selector: dict[str, str] = Field(default_factory=dict)
    """Exact label matchers on target, request_class, model or source."""
    latency: LatencySLIModel | None = None
    """A latency SLI; give this or `availability`."""
    availability: AvailabilitySLIModel | None = None
    """An availability SLI; give this or `latency`."""
    alert_name: str | None = Field(default=None, pattern=r"^Lanewatch[A-Z][A-Za-z0-9]*$")
    """The burn-rate alert's name; default `Lanewatch<Name>BurnRate`."""

    @model_validator(mode="after")
    def _consistent(self) -> SLOModel:
        if self.objective < 1:
            raise ValueError(f"objective is a percent: write {self.objective * 100:g} for {self.objective}")
        if (self.latency is None) == (self.availability is None):
            raise ValueError("give exactly one SLI: latency or availability")
        allowed = set(names.REQUEST_LABELS) - {names.LANE}
        bad = sorted(set(self.selector) - allowed)
        if bad:
            raise ValueError(
                f"selector labels {bad} not allowed; use {sorted(allowed)} (lane comes from lanes)"
            )
        return self


# ---------------------------------------------------------------- other alerts
class QuantileAlertModel(_Model):
    """A latency quantile over `limit` seconds for `for`, per lane."""

    metric: Metric
    """The latency whose quantile is watched."""
    lanes: list[LaneName] = Field(min_length=1)
    """One alert per lane listed."""
    quantile: float = Field(default=0.99, gt=0, lt=1)
    """The quantile, 0–1."""
    limit: float = Field(gt=0)
    """Seconds the quantile may reach."""
    for_: For = Field(default="5m", alias="for")
    """How long the quantile must stay over `limit`."""
    severity: Severity = "ticket"
    """The alert's `severity` label."""


class ProbeFailuresModel(_Model):
    """Failed probes over all probes of a target above `above` for `for`."""

    above: float = Field(default=0.1, gt=0, lt=1)
    """Share of a target's probes that fail, 0–1."""
    for_: For = Field(default="5m", alias="for")
    """How long the share must stay above."""
    severity: Severity = "ticket"
    """The alert's `severity` label."""


class DownModel(_Model):
    """The collector cannot scrape a target's vLLM /metrics for `for`."""

    for_: For = Field(default="2m", alias="for")
    """How long scrapes must fail."""
    severity: Severity = "ticket"
    """The alert's `severity` label."""


class ComponentDownModel(DownModel):
    """Prometheus cannot scrape a job matching `jobs` for `for`."""

    jobs: Annotated[str, AfterValidator(_regex)] = "lanewatch-.*|vllm.*"
    """Regular expression of the Prometheus jobs watched."""


class NoLeaderModel(_Model):
    """No degrade controller leads (none runs, or neither of a pair holds the lease) for `for`."""

    for_: For = Field(default="30s", alias="for")
    """How long no controller may lead before the page: longer than a takeover (a lease and a try)."""
    severity: Severity = "page"
    """The alert's `severity` label."""


class RouterUnsyncedModel(_Model):
    """A router has not held the controller's current state for `for` (its applies fail)."""

    for_: For = Field(default="2m", alias="for")
    """How long a router may go without the current state: longer than a few reconcile intervals."""
    severity: Severity = "page"
    """The alert's `severity` label."""


class ConvergenceModel(_Model):
    """The fast lane's P99 TTFT at or above `ratio` × the slow lane's for `for`."""

    fast: LaneName
    """The fast lane."""
    slow: LaneName
    """The slow lane it is compared with."""
    ratio: float = Field(default=0.8, gt=0)
    """Fire when fast P99 TTFT ≥ ratio × slow P99 TTFT."""
    for_: For = Field(default="10m", alias="for")
    """How long the ratio must hold."""
    severity: Severity = "ticket"
    """The alert's `severity` label."""

    @model_validator(mode="after")
    def _two_lanes(self) -> ConvergenceModel:
        if self.fast == self.slow:
            raise ValueError("fast and slow must be different lanes")
        return self


class FlatnessModel(_Model):
    """CV of mean E2E across request classes below `maxCv` for `for` while traffic flows."""

    max_cv: float = Field(default=0.1, gt=0)
    """Fire below this coefficient of variation of mean E2E across classes."""
    min_classes: int = Field(default=2, ge=2)
    """Request classes needed before flatness is judged."""
    min_rate: float = Field(default=0.01, ge=0)
    """Requests per second the lane needs before flatness is judged."""
    for_: For = Field(default="15m", alias="for")
    """How long the CV must stay below `maxCv`."""
    severity: Severity = "ticket"
    """The alert's `severity` label."""


class WaitingModel(_Model):
    """vLLM requests waiting for a batch slot above `above` for `for`."""

    above: float = Field(default=10, ge=0)
    """Requests waiting."""
    for_: For = Field(default="5m", alias="for")
    """How long the count must stay above."""
    severity: Severity = "ticket"
    """The alert's `severity` label."""


class KvCacheModel(_Model):
    """vLLM KV-cache usage (0-1) above `above` for `for`."""

    above: float = Field(default=0.9, gt=0, lt=1)
    """KV-cache usage, 0–1."""
    for_: For = Field(default="5m", alias="for")
    """How long usage must stay above."""
    severity: Severity = "ticket"
    """The alert's `severity` label."""


class PreemptionsModel(_Model):
    """vLLM preemptions per second above `above` for `for`."""

    above: float = Field(default=0, ge=0)
    """Preemptions per second."""
    for_: For = Field(default="10m", alias="for")
    """How long the rate must stay above."""
    severity: Severity = "ticket"
    """The alert's `severity` label."""


class SaturationModel(_Model):
    """vLLM saturation alerts; each is on unless set to null."""

    waiting_requests: WaitingModel | None = WaitingModel()
    """`LanewatchVLLMRequestsWaiting`; null turns it off."""
    kv_cache_usage: KvCacheModel | None = KvCacheModel()
    """`LanewatchVLLMKVCacheFull`; null turns it off."""
    preemptions: PreemptionsModel | None = PreemptionsModel()
    """`LanewatchVLLMPreemptions`; null turns it off."""


class AlertsModel(_Model):
    """Alerts besides burn rates; a section left out generates nothing."""

    latency: list[QuantileAlertModel] = Field(default_factory=list)
    """Latency quantile alerts (`Lanewatch<Metric>P99High` at quantile 0.99)."""
    probe_failures: ProbeFailuresModel | None = None
    """`LanewatchProbeFailures`."""
    target_down: DownModel | None = None
    """`LanewatchTargetDown`: the collector cannot scrape a target."""
    component_down: ComponentDownModel | None = None
    """`LanewatchComponentDown`: Prometheus cannot scrape a job."""
    controller_no_leader: NoLeaderModel | None = None
    """`LanewatchDegradeNoLeader`: no degrade controller leads, so nothing degrades or restores."""
    router_unsynced: RouterUnsyncedModel | None = None
    """`LanewatchDegradeRouterUnsynced`: a router does not hold the leading controller's state."""
    convergence: list[ConvergenceModel] = Field(default_factory=list)
    """`LanewatchLaneConvergence`, one per lane pair."""
    flatness: FlatnessModel | None = None
    """`LanewatchLatencyFlat`."""
    saturation: SaturationModel | None = None
    """The vLLM saturation alerts."""


class LinksModel(_Model):
    """Runbook URL template ({alert}, {anchor} = lower-case alert name) and Grafana's base URL."""

    runbook: str = Field(default=DEFAULT_RUNBOOK, pattern=r"^https?://")
    """Runbook URL template of every alert's `runbook_url`."""
    grafana: str = Field(default="http://localhost:3000", pattern=r"^https?://")
    """Grafana's base URL, for every alert's `dashboard_url`."""


class SpecBodyModel(_Model):
    """`spec:` of a lanewatch/v1 SLOSpec."""

    period: Duration = "28d"
    """The SLO period (a Prometheus duration)."""
    windows: str | WindowSetModel = "standard"
    """A window set of alerts/windows.yaml by name, or one inline."""
    analysis_window: Duration = "5m"
    """Rate window of the quantile, lane and saturation rules."""
    evaluation_interval: Duration | None = None
    """Rule group interval; default: Prometheus' global one."""
    links: LinksModel = LinksModel()
    """Where alerts point."""
    slos: list[SLOModel] = Field(default_factory=list)
    """The objectives."""
    alerts: AlertsModel = AlertsModel()
    """Alerts besides burn rates."""

    @model_validator(mode="after")
    def _unique_slos(self) -> SpecBodyModel:
        declared = (((slo.name, lane), None) for slo in self.slos for lane in slo.lanes)
        for (name, lane), _, _ in repeats(declared):
            raise ValueError(f"SLO {name!r} is declared twice for lane {lane!r}")
        return self


class MetadataModel(_Model):
    """Names the spec; the rule file is `<name>-rules.yml`."""

    name: str = Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
    """Names the spec and its rule file."""
    description: str = ""
    """Free text for people."""


class SpecDocumentModel(_Model):
    """A whole lanewatch/v1 SLOSpec document."""

    api_version: Literal["lanewatch/v1"]
    """Always `lanewatch/v1`."""
    kind: Literal["SLOSpec"]
    """Always `SLOSpec`."""
    metadata: MetadataModel
    """Names the spec."""
    spec: SpecBodyModel
    """The SLOs and alerts."""
