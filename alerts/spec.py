"""The SLO spec: a versioned YAML document, read through its schema (spec_schema.py), mapped
into `model.Spec`.

`apiVersion: lanewatch/v1` is the native format (docs/slo.md; field by field in
docs/slo-spec.md, which specdoc.py generates from the schema); `apiVersion: openslo/v1`
documents are imported for the subset that maps (`openslo.py`). Every problem is reported
at once with its field path and line.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError

from lanewatch.collector.common.input_files import (
    ConfigError,
    ConfigIssue,
    data_path,
    validation_issues,
    yaml_line_index,
)
from lanewatch.exporters import names

from . import model, openslo
from .duration import parse_duration
from .spec_schema import (
    AlertsModel,
    ComponentDownModel,
    ConvergenceModel,
    DownModel,
    FlatnessModel,
    KvCacheModel,
    MitigationModel,
    NoLeaderModel,
    PreemptionsModel,
    ProbeFailuresModel,
    QuantileAlertModel,
    RouterUnsyncedModel,
    SeverityWindowsModel,
    SLOModel,
    SpecDocumentModel,
    WaitingModel,
    WindowPairModel,
    WindowSetModel,
    WindowsFileModel,
    seconds_of,
)

API_VERSION: Final = "lanewatch/v1"
KIND: Final = "SLOSpec"
HERE: Final = data_path("lanewatch.alerts")  # the specs and windows ship as package data
WINDOWS_FILE: Final = HERE / "windows.yaml"
DEFAULT_SPEC: Final = HERE / "slos.yaml"
DEMO_SPEC: Final = HERE / "slos-demo.yaml"
DEMO_VLLM_SPEC: Final = HERE / "slos-demo-vllm.yaml"  # the demo on real CPU engines
BUNDLED_SPECS: Final = (DEFAULT_SPEC, DEMO_SPEC, DEMO_VLLM_SPEC)

Lines = dict[tuple[str, ...], int]


class SpecError(ConfigError):
    """A spec that cannot be used; `issues` lists every problem with its field and line."""

    def __init__(self, source: str, issues: list[ConfigIssue]) -> None:
        super().__init__(source, issues)
        # ConfigError's text, naming the file as what it is
        self.args = ("\n".join([f"invalid SLO spec {source}:", *(f"  {i}" for i in issues)]),)


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
        for_s=seconds_of(m.for_),
        interval_s=parse_duration(m.interval),
    )


def _burn_policies(windows: WindowSetModel, period_s: int) -> tuple[model.BurnPolicy, ...]:
    by_severity: tuple[tuple[model.Severity, SeverityWindowsModel | None], ...] = (
        ("page", windows.page),
        ("ticket", windows.ticket),
    )
    return tuple(
        model.BurnPolicy(severity, seconds_of(group.for_), tuple(_pair(p, period_s) for p in group.pairs))
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
        "controller_no_leader": _down(alerts.controller_no_leader),
        "router_unsynced": _down(alerts.router_unsynced),
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
            for_s=seconds_of(a.for_),
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
            for_s=seconds_of(c.for_),
            severity=c.severity,
            origin=_origin(lines, "spec", "alerts", "convergence", str(i)),
        )
        for i, c in enumerate(pairs)
    ]


def _check(
    m: ProbeFailuresModel | WaitingModel | KvCacheModel | PreemptionsModel | None,
) -> model.Check | None:
    return None if m is None else model.Check(m.above, seconds_of(m.for_), m.severity)


def _down(m: DownModel | NoLeaderModel | RouterUnsyncedModel | None) -> model.Down | None:
    if m is None:
        return None
    jobs = m.jobs if isinstance(m, ComponentDownModel) else ""
    return model.Down(seconds_of(m.for_), m.severity, jobs)


def _flatness(m: FlatnessModel | None) -> model.Flatness | None:
    if m is None:
        return None
    return model.Flatness(m.max_cv, m.min_classes, m.min_rate, seconds_of(m.for_), m.severity)
