"""The template variables all dashboards share (datasource, target, lane, model), and selectors over them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from grafanalib.core import REFRESH_ON_TIME_RANGE_CHANGE, Template, Templating

from lanewatch.exporters import names

DATASOURCE: Final = {"type": "prometheus", "uid": "${datasource}"}
VARIABLES: Final = ("datasource", "target", "lane", "model")
RATE: Final = "$__rate_interval"

# Request series: every source (probe, tap) labels them target, lane, request_class, model, source.
REQUEST: Final = f'{names.TARGET}=~"$target",{names.LANE}=~"$lane",{names.MODEL}=~"$model"'
# vLLM series carry model_name; lane (and target) only where the scrape config adds them,
# which deploy/prometheus does. ".*" (All) also matches a missing label.
VLLM: Final = f'{names.LANE}=~"$lane",model_name=~"$model"'
LANE: Final = f'{names.LANE}=~"$lane"'


def sel(metric: str, matchers: str, *extra: str) -> str:
    """metric{matchers,extra...}."""
    return f"{metric}{{{','.join([matchers, *extra])}}}"


def either(metric: str, expr: Callable[[str], str]) -> str:
    """`expr` over a vLLM family's current name `or` each older name: whichever the target exposes."""
    parts = [expr(name) for name in names.vllm_family_names(metric)]
    return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"


def firing(severity: str | None = None) -> str:
    """Prometheus' ALERTS series of firing lanewatch alerts in the selected lanes."""
    extra = [f'{names.SEVERITY}="{severity}"'] if severity else []
    return sel(names.ALERTS, f'alertstate="firing",alertname=~"{names.ALERT_PREFIX}.*",{LANE}', *extra)


def _query_var(name: str, label: str, query: str) -> Template:
    return Template(
        name=name,
        label=label,
        query=query,
        dataSource=DATASOURCE,
        default="$__all",
        includeAll=True,
        multi=True,
        allValue=".*",
        refresh=REFRESH_ON_TIME_RANGE_CHANGE,
    )


def variables() -> Templating:
    """datasource, then target, lane and model, each narrowing the next."""
    requests = names.REQUESTS_TOTAL
    return Templating(
        list=[
            Template(
                name="datasource", label="Data source", query="prometheus", type="datasource", default=""
            ),
            _query_var("target", "Target", f"label_values({requests}, {names.TARGET})"),
            _query_var("lane", "Lane", f'label_values({requests}{{target=~"$target"}}, {names.LANE})'),
            _query_var(
                "model",
                "Model",
                f'label_values({requests}{{target=~"$target",lane=~"$lane"}}, {names.MODEL})',
            ),
        ]
    )
