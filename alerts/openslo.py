"""Import OpenSLO v1 documents into a lanewatch/v1 spec, for the subset that maps.

What maps (anything else is an error naming the document, field and line):
- `kind: SLO` with a rolling `timeWindow` (one, the same for all SLOs), `budgetingMethod:
  Occurrences` and one objective; `kind: SLI` documents referenced by `indicatorRef`;
  `kind: Service` documents are accepted and ignored.
- `thresholdMetric` over a lanewatch latency histogram, e.g. query
  `lanewatch_ttft_seconds{lane="fast"}` with objective `op: lte`, `value: 0.5`: a latency SLO.
- `ratioMetric` with `bad` = `lanewatch_request_errors_total{...}` and `total` =
  `lanewatch_requests_total{...}` (the same matchers): an availability SLO.
Queries are a metric name with exact `label="value"` matchers; `lane` is required.
"""

from __future__ import annotations

import re
from typing import Any, Final

from lanewatch.collector.common.input_files import ConfigIssue
from lanewatch.exporters import names

from .model import HISTOGRAMS

API_VERSION: Final = "openslo/v1"
_QUERY = re.compile(r"^\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{(.*)\})?\s*$")
_MATCHER = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"\\]*)"\s*$')
_LATENCY_BY_HISTOGRAM: Final = {histogram: metric for metric, histogram in HISTOGRAMS.items()}

Lines = dict[tuple[str, ...], int]
Document = tuple[dict[str, Any], Lines]


class _Unmappable(Exception):
    def __init__(self, path: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def to_lanewatch(documents: list[Document], name: str) -> tuple[dict[str, Any], Lines, list[ConfigIssue]]:
    """The lanewatch/v1 document for OpenSLO `documents`, its line index, and every problem found."""
    issues: list[ConfigIssue] = []
    slis: dict[str, dict[str, Any]] = {}
    for number, (data, lines) in enumerate(documents, start=1):
        _catch(issues, number, lines, lambda data=data: _register(data, slis))
    slos: list[dict[str, Any]] = []
    out_lines: Lines = {}
    periods: list[str] = []
    for number, (data, lines) in enumerate(documents, start=1):
        if data.get("kind") == "SLO" and data.get("apiVersion") == API_VERSION:
            converted = _catch(issues, number, lines, lambda data=data: _slo(data, slis))
            if converted is not None:
                slo, period = converted
                _place(out_lines, len(slos), lines)
                slos.append(slo)
                periods.append(period)
    if len(set(periods)) > 1:
        issues.append(ConfigIssue(path="spec.timeWindow", message=f"SLOs disagree on the period: {periods}"))
    spec: dict[str, Any] = {"slos": slos}
    if periods:
        spec["period"] = periods[0]
    metadata = {"name": re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63] or "openslo"}
    return (
        {"apiVersion": "lanewatch/v1", "kind": "SLOSpec", "metadata": metadata, "spec": spec},
        out_lines,
        issues,
    )


def _catch(issues: list[ConfigIssue], number: int, lines: Lines, step: Any) -> Any:
    try:
        return step()
    except _Unmappable as exc:
        line = next((lines[exc.path[:n]] for n in range(len(exc.path), 0, -1) if exc.path[:n] in lines), None)
        path = ".".join(exc.path) or "(root)"
        issues.append(ConfigIssue(path=f"document {number}: {path}", message=exc.message, line=line))
        return None


def _register(data: dict[str, Any], slis: dict[str, dict[str, Any]]) -> None:
    if data.get("apiVersion") != API_VERSION:
        raise _Unmappable(("apiVersion",), f"expected {API_VERSION} like the other documents")
    kind = data.get("kind")
    if kind == "SLI":
        slis[_get(data, str, "metadata", "name")] = _get(data, dict, "spec")
    elif kind not in ("SLO", "Service"):
        raise _Unmappable(("kind",), f"kind {kind!r} does not map; supported: SLO, SLI, Service")


def _get(data: Any, kind: type, *path: str) -> Any:
    value = data
    for i, key in enumerate(path):
        if not isinstance(value, dict) or key not in value:
            raise _Unmappable(path[: i + 1], f"required {kind.__name__} missing")
        value = value[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise _Unmappable(path, f"must be a {kind.__name__}")
    return value


def _slo(data: dict[str, Any], slis: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], str]:
    spec = _get(data, dict, "spec")
    period = _period(spec)
    if spec.get("budgetingMethod") != "Occurrences":
        raise _Unmappable(("spec", "budgetingMethod"), "only Occurrences maps (lanewatch counts requests)")
    objectives = _get(data, list, "spec", "objectives")
    if len(objectives) != 1:
        raise _Unmappable(("spec", "objectives"), "exactly one objective maps (one threshold per SLO)")
    objective = objectives[0]
    if not isinstance(objective, dict):
        raise _Unmappable(("spec", "objectives", "0"), "must be a mapping")
    slo = _indicator(spec, slis, objective)
    slo["objective"] = _target(objective)
    if isinstance(spec.get("description"), str):
        slo["description"] = spec["description"]
    return slo, period


def _period(spec: dict[str, Any]) -> str:
    windows = _get(spec, list, "timeWindow")
    if len(windows) != 1 or not isinstance(windows[0], dict):
        raise _Unmappable(("spec", "timeWindow"), "exactly one time window maps")
    if windows[0].get("isRolling") is not True or "calendar" in windows[0]:
        raise _Unmappable(("spec", "timeWindow", "0"), "only rolling windows map (isRolling: true)")
    return str(_get(windows[0], str, "duration"))


def _target(objective: dict[str, Any]) -> float:
    if "target" in objective:
        target = objective["target"]
        if isinstance(target, int | float) and 0 < target < 1:
            return round(float(target) * 100, 10)
        raise _Unmappable(("spec", "objectives", "0", "target"), "must be a number between 0 and 1")
    if "targetPercent" in objective:
        percent = objective["targetPercent"]
        if isinstance(percent, int | float) and 0 < percent < 100:
            return float(percent)
        raise _Unmappable(("spec", "objectives", "0", "targetPercent"), "must be a number between 0 and 100")
    raise _Unmappable(("spec", "objectives", "0"), "give target or targetPercent")


def _indicator(
    spec: dict[str, Any], slis: dict[str, dict[str, Any]], objective: dict[str, Any]
) -> dict[str, Any]:
    if "indicatorRef" in spec:
        ref = spec["indicatorRef"]
        if ref not in slis:
            raise _Unmappable(("spec", "indicatorRef"), f"no SLI document named {ref!r} in this file")
        sli = slis[ref]
    else:
        sli = _get(spec, dict, "indicator", "spec")
    if "thresholdMetric" in sli:
        return _latency(sli, objective)
    if "ratioMetric" in sli:
        return _availability(sli)
    raise _Unmappable(("spec", "indicator", "spec"), "give thresholdMetric or ratioMetric")


def _latency(sli: dict[str, Any], objective: dict[str, Any]) -> dict[str, Any]:
    metric, lane, selector = _query(_get(sli, dict, "thresholdMetric"), ("thresholdMetric",))
    if metric not in _LATENCY_BY_HISTOGRAM:
        known = ", ".join(sorted(_LATENCY_BY_HISTOGRAM))
        where = ("spec", "indicator", "spec", "thresholdMetric", "metricSource", "spec", "query")
        raise _Unmappable(where, f"{metric} is not one of {known}")
    if objective.get("op") != "lte":
        raise _Unmappable(("spec", "objectives", "0", "op"), "only op: lte maps (histogram buckets are ≤)")
    value = objective.get("value")
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise _Unmappable(("spec", "objectives", "0", "value"), "must be a positive number of seconds")
    name = _LATENCY_BY_HISTOGRAM[metric]
    latency = {"metric": name, "threshold": float(value)}
    return {"name": name, "lanes": [lane], "selector": selector, "latency": latency}


def _availability(sli: dict[str, Any]) -> dict[str, Any]:
    ratio = _get(sli, dict, "ratioMetric")
    if "bad" not in ratio:
        raise _Unmappable(("spec", "indicator", "spec", "ratioMetric"), "only bad/total ratios map")
    bad_metric, lane, selector = _query(_get(ratio, dict, "bad"), ("ratioMetric", "bad"))
    total_metric, total_lane, total_selector = _query(_get(ratio, dict, "total"), ("ratioMetric", "total"))
    expected = (names.REQUEST_ERRORS_TOTAL, names.REQUESTS_TOTAL)
    if (bad_metric, total_metric) != expected or (lane, selector) != (total_lane, total_selector):
        raise _Unmappable(
            ("spec", "indicator", "spec", "ratioMetric"),
            f"bad must be {expected[0]} and total {expected[1]}, with the same matchers",
        )
    return {"name": "availability", "lanes": [lane], "selector": selector, "availability": {}}


def _query(source: dict[str, Any], where: tuple[str, ...]) -> tuple[str, str, dict[str, str]]:
    path = ("spec", "indicator", "spec", *where, "metricSource")
    metric_source = source.get("metricSource")
    if not isinstance(metric_source, dict) or str(metric_source.get("type", "")).lower() != "prometheus":
        raise _Unmappable(path, "only metricSource type Prometheus maps")
    query = _get(metric_source, str, "spec", "query")
    match = _QUERY.match(query)
    matchers = [m for m in (match.group(2) or "").split(",") if m.strip()] if match else []
    parsed = [_MATCHER.match(m) for m in matchers]
    if match is None or not all(parsed):
        raise _Unmappable((*path, "spec", "query"), f'{query!r}: use metric{{label="value", ...}}')
    labels = {m.group(1): m.group(2) for m in parsed if m}
    lane = labels.pop(names.LANE, None)
    if not lane:
        raise _Unmappable((*path, "spec", "query"), f'{query!r}: a lane="..." matcher is required')
    return match.group(1), lane, labels


def _place(out: Lines, index: int, lines: Lines) -> None:
    """Point the converted SLO's fields at the lines of the OpenSLO document they came from."""
    start = min(lines.values(), default=1)
    base = ("spec", "slos", str(index))
    out[base] = lines.get(("spec",), start)
    objective = lines.get(("spec", "objectives", "0"))
    if objective:
        out[(*base, "objective")] = objective
        out[(*base, "latency", "threshold")] = lines.get(("spec", "objectives", "0", "value"), objective)
