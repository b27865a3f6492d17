"""`lanewatch diagnose`: where a lane's time goes and why, from a records file, Prometheus, or both."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .app import app
from .fail import fail

if TYPE_CHECKING:
    from lanewatch.collector.diagnose import Thresholds

FOUND = 1  # exit status when there are findings (0: none; 2: bad input)
ENV_PREFIX = "LANEWATCH__"  # collector/config.py's, spelled here so a plain diagnosis need not load it


@app.command("diagnose", short_help="Name the bottlenecks of each lane, with their evidence.")
def diagnose(
    records: Path | None = typer.Argument(
        None, help="A records.jsonl file (the demo's or a collector's).", show_default=False
    ),
    prometheus: str | None = typer.Option(
        None,
        "--prometheus",
        help="Prometheus base URL to query (HTTP API /api/v1/query).",
        show_default=False,
    ),
    lane: list[str] = typer.Option(
        [], "--lane", help="Diagnose only this lane (repeatable; default: every lane).", show_default=False
    ),
    window: str = typer.Option("10m", "--window", help="With --prometheus: the range each query covers."),
    # the defaults are queries.TIMEOUT_S and RUN_TIMEOUT_S, spelled here so --help loads no diagnosis
    query_timeout: float = typer.Option(
        10.0,
        "--query-timeout",
        min=0.001,
        help="With --prometheus: seconds one query may take, from asking to the answer's last byte.",
    ),
    deadline: float = typer.Option(
        120.0,
        "--deadline",
        min=0.001,
        help="With --prometheus: seconds every query of the run may take together.",
    ),
    slo_spec: Path | None = typer.Option(
        None,
        "--slo-spec",
        help="SLO spec whose latency SLOs and lane pairs anchor the findings "
        "(default: the bundled alerts/slos.yaml).",
        show_default=False,
    ),
    config: Path | None = typer.Option(
        None,
        "-c",
        "--config",
        help="Config file whose `diagnose:` section sets the thresholds (default: the documented defaults).",
        show_default=False,
    ),
    check: list[str] = typer.Option(
        [],
        "--check",
        help="Run only this check, such as queue/kv-memory (repeatable; default: every check).",
        show_default=False,
    ),
    skip: list[str] = typer.Option(
        [], "--skip", help="Do not run this check (repeatable).", show_default=False
    ),
    max_num_batched_tokens: int | None = typer.Option(
        None,
        "--max-num-batched-tokens",
        min=1,
        help="The lane's vLLM token budget, to judge whether steps run at it.",
        show_default=False,
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the lanewatch.diagnose/v1 JSON document."),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="Skip lines of RECORDS that are not records."),
) -> None:
    """Diagnose each lane: ranked findings with their evidence, what was ruled out, and fixes.

    Exit status: 0 when nothing was found, 1 when there are findings, 2 on bad input (an unknown
    check id included).
    docs/diagnose.md lists the checks, their thresholds and the JSON schema.
    """
    from lanewatch.alerts.spec import DEFAULT_SPEC, SpecError, load_spec
    from lanewatch.collector.diagnose import diagnose, slo_targets
    from lanewatch.collector.diagnose.gather import DiagnoseInputError, Sources, gather
    from lanewatch.collector.diagnose.registry import UnknownCheckError, select
    from lanewatch.collector.diagnose.render import to_json, to_text
    from lanewatch.collector.record.goodput import from_spec

    try:
        spec = load_spec(slo_spec or DEFAULT_SPEC)
    except SpecError as exc:
        fail("diagnose", f"--slo-spec: {exc}")
    pairs = tuple((c.fast, c.slow) for c in spec.convergence)
    thresholds = _thresholds(config)
    if max_num_batched_tokens is not None:
        thresholds = thresholds.model_copy(update={"max_num_batched_tokens": max_num_batched_tokens})
    # a flag replaces the config's list; the gather step and the run both choose by the result
    thresholds = thresholds.model_copy(
        update={"checks": tuple(check or thresholds.checks), "skip": tuple(skip or thresholds.skip)}
    )
    try:
        select(
            thresholds.checks,
            thresholds.skip,
            only_from=_from(check, "checks"),
            skip_from=_from(skip, "skip"),
        )
    except UnknownCheckError as exc:
        fail("diagnose", exc)
    sources = Sources(records, prometheus, tuple(lane), window, skip_bad)
    # A file's records all stay alive to the end: collections while summarising them would only
    # walk them again and again.
    paused = gc.isenabled()
    gc.disable()
    try:
        evidence, _ = gather(
            sources,
            slo_targets(from_spec(spec)),
            pairs,
            thresholds,
            timeout_s=query_timeout,
            deadline_s=deadline,
        )
    except DiagnoseInputError as exc:
        fail("diagnose", exc)
    finally:
        if paused:
            gc.enable()
    result = diagnose(evidence, thresholds)
    if as_json:
        typer.echo(json.dumps(to_json(result, window=evidence.span, sources=evidence.sources), indent=2))
    else:
        typer.echo(to_text(result, sources=evidence.sources), nl=False)
    if any(lane.found for lane in result):
        raise typer.Exit(FOUND)


def _from(flag: list[str], key: str) -> str:
    """Where a list of check ids came from, for an error naming an unknown one."""
    return f"--{key.removesuffix('s')}" if flag else f"diagnose.{key}"


def _thresholds(config: Path | None) -> Thresholds:
    """The config's `diagnose:` thresholds (file, then LANEWATCH__ overrides); the defaults without either."""
    from lanewatch.collector.diagnose import DEFAULT_THRESHOLDS

    # The whole config (its adapters, httpx, pydantic-settings) loads only when it can say something.
    if config is None and not any(key.upper().startswith(ENV_PREFIX) for key in os.environ):
        return DEFAULT_THRESHOLDS
    from lanewatch.collector.config import ConfigError, load_config

    try:
        return load_config(config).diagnose
    except ConfigError as exc:
        fail("diagnose", exc)
