"""`lanewatch gateway`: the lane router and passive tap in front of vLLM servers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from lanewatch.collector.common.errors import ConfigError, LanewatchError

from .app import app
from .fail import fail

if TYPE_CHECKING:
    from lanewatch.collector.gateway.settings import GatewayConfig


@app.command("gateway", short_help="Route requests to lanes, apply degrades, tap every stream.")
def gateway(
    config: Path | None = typer.Option(
        None, "-c", "--config", help="YAML config file (its `gateway:` section)."
    ),
    host: str | None = typer.Option(None, "--host", help="Address to listen on (default: 127.0.0.1)."),
    port: int | None = typer.Option(None, "--port", help="Port to listen on (default: 8080)."),
    upstream: list[str] = typer.Option(
        [], "--upstream", help="LANE=URL; repeat for more lanes, or for more servers in one lane's pool."
    ),
    model: list[str] = typer.Option(
        [],
        "--model",
        help="LANE=NAME: a model the lane serves (repeat for more; the first is what requests shifted "
        "there are rewritten to). Replaces that lane's gateway.lanes.<lane>.models.",
    ),
    lane_order: str | None = typer.Option(
        None, "--lane-order", help="Lanes fastest first, comma separated (default: as first named)."
    ),
    default_lane: str | None = typer.Option(
        None, "--default-lane", help="Lane for requests no rule matches (default: the slowest)."
    ),
    admin_token_file: Path | None = typer.Option(
        None, "--admin-token-file", help="Bearer token for /admin/degrade; without it the admin API is off."
    ),
    admin_insecure: bool = typer.Option(
        False, "--admin-insecure", help="Serve /admin/degrade without a token (development only)."
    ),
    cacert: Path | None = typer.Option(None, "--cacert", help="CA bundle to verify HTTPS upstreams with."),
    insecure: bool = typer.Option(
        False, "-k", "--insecure", help="Do not verify HTTPS upstreams' certificates."
    ),
    otlp_endpoint: str | None = typer.Option(
        None, "--otlp-endpoint", help="OTLP/HTTP traces URL for a server span per request."
    ),
    records: Path | None = typer.Option(
        None, "--records", help="Append every tap record to this JSONL file."
    ),
    collector: str | None = typer.Option(
        None,
        "--collector",
        help="Ship tap records to this collector's POST /v1/records (base URL, gateway.collector_url); "
        "it joins them to vLLM's spans and exports their metrics, so this gateway's /metrics does not.",
    ),
    trust_hints: list[str] = typer.Option(
        [],
        "--trust-hints",
        help="Honour x-lanewatch-class and x-lanewatch-lane from clients in this network (CIDR, "
        "repeatable; gateway.hints.trusted_networks). Without it the operator's rules class every request.",
    ),
    workers: str | None = typer.Option(
        None,
        "--workers",
        help="Processes serving the one port (gateway.workers; default 1): a number, or auto for the "
        "cores this process may use. They share one degrade state, one /metrics and the records.",
    ),
    record_content: bool = typer.Option(
        False,
        "--record-content",
        help="Also record prompt and response text (16 KiB each at most) in tap records and spans "
        "(export.record_content); off by default.",
    ),
) -> None:
    """Route OpenAI requests to lanes, apply degrade state, stream answers through and tap them."""
    # Imported here, not at the top: every command module is loaded to build the CLI.
    from pydantic import ValidationError

    from lanewatch.collector.common.secrets import read_secret_or_none
    from lanewatch.collector.common.settings import Flag, override
    from lanewatch.collector.config import load_config

    try:
        full = load_config(config)
        cfg = _gateway_config(
            full.gateway,
            host,
            port,
            upstream,
            model,
            lane_order,
            default_lane,
            admin_token_file,
            admin_insecure,
            cacert,
            insecure,
            trust_hints,
            workers,
        )
        flags = {
            "otlp_endpoint": Flag("--otlp-endpoint", otlp_endpoint),
            "collector_url": Flag("--collector", collector),
        }
        cfg = override(cfg, {k: f for k, f in flags.items() if f.value}, "gateway.")
        # an unreadable or empty token file: say so now, not at the first send
        read_secret_or_none(cfg.collector_token_file, "collector_token_file")
    except ValidationError as exc:
        fail("gateway", "\n".join(["invalid settings:", *map(_problem, exc.errors())]))
    except LanewatchError as exc:  # a config file, a flag or a token file that cannot be used
        fail("gateway", exc)
    content = {"record_content": Flag("--record-content", True)} if record_content else {}
    export = override(full.export, content, "export.")
    from lanewatch.collector.gateway.processes.serve import serve

    try:
        serve(cfg, export, records or full.export.records_path)
    except LanewatchError as exc:  # a setting at fault exits 2, a taken port 1
        fail("gateway", exc)


def _problem(error: Any) -> str:
    """One validation error as `  gateway.<field>: <message>`."""
    where = ".".join(str(p) for p in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"  gateway{'.' + where if where else ''}: {message}"


def _gateway_config(
    base: GatewayConfig,
    host: str | None,
    port: int | None,
    upstream: list[str],
    models: list[str],
    lane_order: str | None,
    default_lane: str | None,
    admin_token_file: Path | None,
    admin_insecure: bool,
    cacert: Path | None,
    insecure: bool,
    trust_hints: list[str],
    workers: str | None = None,
) -> GatewayConfig:
    """The file's gateway section with the command line's flags laid over it."""
    from lanewatch.collector.gateway.settings import GatewayConfig

    data = base.model_dump()
    if upstream:
        data["lanes"] = _lanes_from_flags(upstream, cacert, insecure)
        data["lane_order"] = []
    elif cacert or insecure:
        data["lanes"] = {k: {**v, "cacert": cacert, "insecure": insecure} for k, v in data["lanes"].items()}
    for lane, names in _models_from_flags(models, set(data["lanes"])).items():
        data["lanes"][lane] = {**data["lanes"][lane], "models": names, "model_map": {}}
    if lane_order:
        data["lane_order"] = [s.strip() for s in lane_order.split(",") if s.strip()]
    server = dict(data["server"])
    if host:
        server["host"] = host
    if port is not None:
        server["port"] = port
    data["server"] = server
    for key, value in (
        ("default_lane", default_lane),
        ("admin_token_file", admin_token_file),
        ("workers", workers),
    ):
        if value is not None:
            data[key] = value
    data["admin_insecure"] = data["admin_insecure"] or admin_insecure
    if trust_hints:
        hints = dict(data["hints"])
        hints["trusted_networks"] = [*hints["trusted_networks"], *trust_hints]
        data["hints"] = hints
    cfg = GatewayConfig.model_validate(data)
    if not cfg.lanes:
        raise ConfigError(
            "no lanes: give --upstream LANE=URL (repeatable) or a config file with gateway.lanes"
        )
    return cfg


def _lanes_from_flags(flags: list[str], cacert: Path | None, insecure: bool) -> dict[str, dict[str, object]]:
    from lanewatch.collector.gateway.settings import LaneConfig

    lanes: dict[str, list[str]] = {}
    for flag in flags:
        lane, sep, url = flag.partition("=")
        if not sep or not lane or not url:
            raise ConfigError(f"--upstream {flag!r}: expected LANE=URL, e.g. fast=http://127.0.0.1:8001")
        lanes.setdefault(lane.strip(), []).append(url.strip())
    return {
        lane: LaneConfig(upstreams=urls, cacert=cacert, insecure=insecure).model_dump()
        for lane, urls in lanes.items()
    }


def _models_from_flags(flags: list[str], lanes: set[str]) -> dict[str, list[str]]:
    """`--model LANE=NAME` flags -> each named lane's models, in the order given."""
    out: dict[str, list[str]] = {}
    for flag in flags:
        lane, sep, name = (part.strip() for part in flag.partition("="))
        if not sep or not lane or not name:
            raise ConfigError(f"--model {flag!r}: expected LANE=NAME, e.g. fast=Qwen/Qwen2.5-0.5B-Instruct")
        if lane not in lanes:
            raise ConfigError(f"--model {flag!r}: no lane {lane!r}; lanes: {', '.join(sorted(lanes))}")
        out.setdefault(lane, []).append(name)
    return out
