"""The SLO spec: a versioned YAML document, parsed into pydantic models, mapped into `model.Spec`.

`apiVersion: lanewatch/v1` is the native format (docs/slo.md; field by field in
docs/slo-spec.md, which specdoc.py generates from these models); `apiVersion: openslo/v1`
documents are imported for the subset that maps (`openslo.py`). Every problem is reported
at once with its field path and line.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from lanewatch.collector.common.input_files import (
    ConfigError,
    ConfigIssue,
    data_path,
    validation_issues,
    yaml_line_index,
)
from lanewatch.collector.common.validation import LaneName, repeats
from lanewatch.collector.record.error_kinds import CLIENT_ERROR_KINDS, METRIC_ERROR_KINDS
from lanewatch.exporters import names

from . import model, openslo
from .duration import parse_duration

API_VERSION: Final = "lanewatch/v1"
KIND: Final = "SLOSpec"
HERE: Final = data_path("lanewatch.alerts")  # the specs and windows ship as package data
WINDOWS_FILE: Final = HERE / "windows.yaml"
DEFAULT_SPEC: Final = HERE / "slos.yaml"
DEMO_SPEC: Final = HERE / "slos-demo.yaml"
DEMO_VLLM_SPEC: Final = HERE / "slos-demo-vllm.yaml"  # the demo on real CPU engines
BUNDLED_SPECS: Final = (DEFAULT_SPEC, DEMO_SPEC, DEMO_VLLM_SPEC)
DEFAULT_RUNBOOK: Final = "https://github.com/lanewatch/lanewatch/blob/main/docs/runbooks.md#{anchor}"

Lines = dict[tuple[str, ...], int]


class SpecError(ConfigError):
    """A spec that cannot be used; `issues` lists every problem with its field and line."""

    def __init__(self, source: str, issues: list[ConfigIssue]) -> None:
        super().__init__(source, issues)
        # ConfigError's text, naming the file as what it is
        self.args = ("\n".join([f"invalid SLO spec {source}:", *(f"  {i}" for i in issues)]),)


def _duration(value: str) -> str:
    parse_duration(value)
    return value


def _for(value: str) -> str:
    parse_duration(value, allow_zero=True)
    return value


def _seconds(value: str) -> int:
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


# ---------------------------------------------------------------- loading
def load_spec(path: Path) -> model.Spec:
    """Read, validate and map one spec file (lanewatch/v1, or openslo/v1 documents)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(str(path), [ConfigIssue(path="(file)", message=exc.strerror or str(exc))]) from None
    return parse_spec(text, str(path))


def parse_spec(text: str, source: str) -> model.Spec:
    """Validate and map spec text; `source` names it in errors and in the generated header."""
    documents = _documents(text, source)
    if any(data.get("apiVersion") == openslo.API_VERSION for data, _ in documents):
        data, lines, issues = openslo.to_lanewatch(documents, Path(source).stem)
        if issues:
            raise SpecError(source, issues)
        return build_spec(data, lines, source)
    if len(documents) != 1:
        raise SpecError(source, [ConfigIssue(path="(yaml)", message="a lanewatch/v1 spec is one document")])
    data, lines = documents[0]
    if data.get("apiVersion") != API_VERSION:
        message = f"unsupported {data.get('apiVersion')!r}; supported: {API_VERSION}, {openslo.API_VERSION}"
        raise SpecError(
            source, [ConfigIssue(path="apiVersion", message=message, line=lines.get(("apiVersion",)))]
        )
    return build_spec(data, lines, source)


def build_spec(data: dict[str, Any], lines: Lines, source: str) -> model.Spec:
    """Validate a lanewatch/v1 document and map it into frozen dataclasses."""
    try:
        doc = SpecDocumentModel.model_validate(data)
    except ValidationError as exc:
        raise SpecError(source, validation_issues(exc, lines)) from None
    body = doc.spec
    period_s = parse_duration(body.period)
    windows = _window_set(body.windows, lines, source)
    return model.Spec(
        name=doc.metadata.name,
        source=source,
        period_s=period_s,
        analysis_window_s=parse_duration(body.analysis_window),
        evaluation_interval_s=parse_duration(body.evaluation_interval) if body.evaluation_interval else None,
        burn=_burn_policies(windows, period_s),
        mitigation=_mitigation(windows.mitigate),
        slos=tuple(_slos(body.slos, lines)),
        links=model.Links(runbook=body.links.runbook, grafana=body.links.grafana.rstrip("/")),
        **_alerts(body.alerts, lines),
    )


def _documents(text: str, source: str) -> list[tuple[dict[str, Any], Lines]]:
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        datas = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise SpecError(source, [ConfigIssue(path="(yaml)", message=str(exc), line=line)]) from None
    out: list[tuple[dict[str, Any], Lines]] = []
    for node, data in zip(nodes, datas, strict=True):
        if data is None:
            continue
        if not isinstance(data, dict):
            line = node.start_mark.line + 1 if node is not None else None
            raise SpecError(source, [ConfigIssue(path="(root)", message="must be a mapping", line=line)])
        lines: Lines = {}
        yaml_line_index(node, (), lines)
        out.append((data, lines))
    if not out:
        raise SpecError(source, [ConfigIssue(path="(root)", message="the file holds no document")])
    return out


@functools.cache
def window_sets() -> dict[str, WindowSetModel]:
    """The named window sets of alerts/windows.yaml."""
    data = yaml.safe_load(WINDOWS_FILE.read_text(encoding="utf-8"))
    return dict(WindowsFileModel.model_validate(data).sets)


def _window_set(windows: str | WindowSetModel, lines: Lines, source: str) -> WindowSetModel:
    if isinstance(windows, WindowSetModel):
        return windows
    sets = window_sets()
    if windows not in sets:
        message = f"unknown window set {windows!r}; {WINDOWS_FILE.name} has: {', '.join(sorted(sets))}"
        line = lines.get(("spec", "windows"))
        raise SpecError(source, [ConfigIssue(path="spec.windows", message=message, line=line)])
    return sets[windows]


def _mitigation(m: MitigationModel | None) -> model.Mitigation | None:
    if m is None:
        return None
    return model.Mitigation(
        window_s=parse_duration(m.window),
        error_ratio=m.error_ratio,
        for_s=_seconds(m.for_),
        interval_s=parse_duration(m.interval),
    )


def _burn_policies(windows: WindowSetModel, period_s: int) -> tuple[model.BurnPolicy, ...]:
    by_severity: tuple[tuple[model.Severity, SeverityWindowsModel | None], ...] = (
        ("page", windows.page),
        ("ticket", windows.ticket),
    )
    return tuple(
        model.BurnPolicy(severity, _seconds(group.for_), tuple(_pair(p, period_s) for p in group.pairs))
        for severity, group in by_severity
        if group is not None
    )


def _pair(pair: WindowPairModel, period_s: int) -> model.WindowPair:
    long_s = parse_duration(pair.long)
    if pair.factor is not None:
        factor = pair.factor
    else:
        assert pair.budget_percent is not None  # by WindowPairModel's validator
        factor = round(pair.budget_percent * period_s / 100 / long_s, 4)
    return model.WindowPair(long_s=long_s, short_s=parse_duration(pair.short), factor=factor)


def _origin(lines: Lines, *path: str) -> str:
    line = lines.get(tuple(path))
    where = ".".join(path)
    return f"{where} (line {line})" if line else where


def _slos(slos: list[SLOModel], lines: Lines) -> list[model.SLO]:
    out = []
    for i, slo in enumerate(slos):
        for lane in slo.lanes:
            out.append(
                model.SLO(
                    name=slo.name,
                    lane=lane,
                    objective=round(slo.objective / 100, 12),
                    metric=slo.latency.metric if slo.latency else None,
                    threshold_s=slo.latency.threshold if slo.latency else None,
                    selector=tuple(sorted(slo.selector.items())),
                    exclude_error_kinds=slo.availability.uncounted() if slo.availability else (),
                    description=slo.description,
                    alert_name=slo.alert_name
                    or f"{names.ALERT_PREFIX}{model.display_name(slo.name)}BurnRate",
                    origin=_origin(lines, "spec", "slos", str(i)),
                )
            )
    return out


def _alerts(alerts: AlertsModel, lines: Lines) -> dict[str, Any]:
    sat = alerts.saturation
    return {
        "latency_alerts": tuple(_quantile_alerts(alerts.latency, lines)),
        "probe_failures": _check(alerts.probe_failures),
        "target_down": _down(alerts.target_down),
        "component_down": _down(alerts.component_down),
        "convergence": tuple(_convergence(alerts.convergence, lines)),
        "flatness": _flatness(alerts.flatness),
        "waiting_requests": _check(sat.waiting_requests if sat else None),
        "kv_cache_usage": _check(sat.kv_cache_usage if sat else None),
        "preemptions": _check(sat.preemptions if sat else None),
    }


def _quantile_alerts(alerts: list[QuantileAlertModel], lines: Lines) -> list[model.QuantileAlert]:
    return [
        model.QuantileAlert(
            metric=a.metric,
            lane=lane,
            quantile=a.quantile,
            limit_s=a.limit,
            for_s=_seconds(a.for_),
            severity=a.severity,
            origin=_origin(lines, "spec", "alerts", "latency", str(i)),
        )
        for i, a in enumerate(alerts)
        for lane in a.lanes
    ]


def _convergence(pairs: list[ConvergenceModel], lines: Lines) -> list[model.Convergence]:
    return [
        model.Convergence(
            fast=c.fast,
            slow=c.slow,
            ratio=c.ratio,
            for_s=_seconds(c.for_),
            severity=c.severity,
            origin=_origin(lines, "spec", "alerts", "convergence", str(i)),
        )
        for i, c in enumerate(pairs)
    ]


def _check(
    m: ProbeFailuresModel | WaitingModel | KvCacheModel | PreemptionsModel | None,
) -> model.Check | None:
    return None if m is None else model.Check(m.above, _seconds(m.for_), m.severity)


def _down(m: DownModel | None) -> model.Down | None:
    if m is None:
        return None
    jobs = m.jobs if isinstance(m, ComponentDownModel) else ""
    return model.Down(_seconds(m.for_), m.severity, jobs)


def _flatness(m: FlatnessModel | None) -> model.Flatness | None:
    if m is None:
        return None
    return model.Flatness(m.max_cv, m.min_classes, m.min_rate, _seconds(m.for_), m.severity)
