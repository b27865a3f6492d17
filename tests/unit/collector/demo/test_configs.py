"""The demo's configs: deploy/ templates filled with loopback ports, 1 s intervals, the demo rules;
and the configs each part validates them with (the gateway, the collector, the policy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lanewatch.collector.common.input_files import load_yaml_model
from lanewatch.collector.config import LanewatchConfig, load_config
from lanewatch.collector.degrade.policy import PolicySpec, load_policy
from lanewatch.collector.demo.configs import (
    DEMO_RULES,
    DEPLOY_DIR,
    MODELS,
    PRODUCTION_RULES,
    SECRETS,
    Layout,
    TemplateError,
    alertmanager_config,
    lanewatch_config,
    policy_config,
    prometheus_config,
    write_configs,
    write_secrets,
)
from lanewatch.collector.demo.stack import Tools, commands
from lanewatch.collector.probe.settings import DEFAULT_CLASSES


def layout(tmp_path: Path) -> Layout:
    return Layout(tmp_path, 8001, 8002, 9464, 8080, 9097, 9090, 9093, seed=3)


def template(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY_DIR / name).read_text())
    return data


def test_prometheus_scrapes_every_part_on_loopback_every_second_with_the_demo_rules(tmp_path: Path) -> None:
    cfg = prometheus_config(template("prometheus/prometheus.yml"), layout(tmp_path))
    assert cfg["global"]["scrape_interval"] == cfg["global"]["evaluation_interval"] == "1s"
    assert cfg["global"]["external_labels"] == {"cluster": "lanewatch"}  # kept from the template
    assert cfg["rule_files"] == [str(DEMO_RULES)] and DEMO_RULES.is_file()
    assert cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["127.0.0.1:9093"]
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert {n: j["static_configs"][0]["targets"] for n, j in jobs.items()} == {
        "lanewatch-collector": ["127.0.0.1:9464"],
        "lanewatch-gateway": ["127.0.0.1:8080"],
        "lanewatch-degrade": ["127.0.0.1:9097"],
        "vllm-fast": ["127.0.0.1:8001"],
        "vllm-slow": ["127.0.0.1:8002"],
    }
    slow = jobs["vllm-slow"]
    assert slow["scheme"] == "https"
    assert slow["tls_config"] == {"ca_file": str(tmp_path / "slow-cert.pem")}
    assert slow["static_configs"][0]["labels"] == {"lane": "slow", "target": "vllm-slow"}  # from deploy/
    # a job's own interval (the collector's 5s in deploy/) gives way to the demo's 1s
    assert not [j for j in jobs.values() if "scrape_interval" in j or "scrape_timeout" in j]


def test_production_timing_keeps_the_shipped_intervals_timers_and_rules(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    write_configs(lay, production=True)
    prom = yaml.safe_load(lay.prometheus_yaml.read_text())
    shipped = template("prometheus/prometheus.yml")
    assert prom["global"]["scrape_interval"] == shipped["global"]["scrape_interval"] == "15s"
    assert prom["global"]["evaluation_interval"] == shipped["global"]["evaluation_interval"] == "30s"
    jobs = {j["job_name"]: j for j in prom["scrape_configs"]}
    assert jobs["lanewatch-collector"]["scrape_interval"] == "5s"
    assert prom["rule_files"] == [str(PRODUCTION_RULES)] and PRODUCTION_RULES.is_file()
    am = yaml.safe_load(lay.alertmanager_yaml.read_text())
    assert am["route"] == template("alertmanager/alertmanager.yml")["route"]


def test_prometheus_without_alertmanager_still_evaluates_rules(tmp_path: Path) -> None:
    cfg = prometheus_config(template("prometheus/prometheus.yml"), layout(tmp_path), alertmanager=False)
    assert "alerting" not in cfg and cfg["rule_files"]


def test_a_template_job_the_demo_does_not_run_is_an_error_naming_it(tmp_path: Path) -> None:
    tpl = template("prometheus/prometheus.yml")
    tpl["scrape_configs"].append({"job_name": "node", "static_configs": [{"targets": ["x:1"]}]})
    with pytest.raises(TemplateError, match="'node'"):
        prometheus_config(tpl, layout(tmp_path))
    tpl["scrape_configs"] = [j for j in tpl["scrape_configs"] if j["job_name"] not in ("node", "vllm-slow")]
    with pytest.raises(TemplateError, match="vllm-slow"):
        prometheus_config(tpl, layout(tmp_path))


def test_alertmanager_posts_to_the_controller_with_its_token_file_and_short_timers(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    cfg = alertmanager_config(template("alertmanager/alertmanager.yml"), lay)
    hook = next(r for r in cfg["receivers"] if r["name"] == "lanewatch-degrade")["webhook_configs"][0]
    assert hook["url"] == "http://127.0.0.1:9097/alertmanager"
    assert hook["send_resolved"] is True
    assert hook["http_config"]["authorization"] == {
        "type": "Bearer",
        "credentials_file": str(lay.token_file("degrade")),
    }
    degrade_routes = [r for r in cfg["route"]["routes"] if r["receiver"] == "lanewatch-degrade"]
    assert degrade_routes and all(
        r["group_wait"] == "1s" and r["group_interval"] == "2s" for r in degrade_routes
    )
    assert cfg["inhibit_rules"] == template("alertmanager/alertmanager.yml")["inhibit_rules"]


def test_alertmanager_template_without_the_controller_receiver_is_an_error(tmp_path: Path) -> None:
    tpl = template("alertmanager/alertmanager.yml")
    tpl["receivers"] = [r for r in tpl["receivers"] if r["name"] != "lanewatch-degrade"]
    with pytest.raises(TemplateError, match="lanewatch-degrade"):
        alertmanager_config(tpl, layout(tmp_path))


def test_written_configs_load_in_the_parts_that_read_them(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    tokens = write_secrets(lay)
    write_configs(lay, probe_interval_s=1.5)
    cfg = load_config(lay.lanewatch_yaml)
    assert [(t.name, t.lane, t.url) for t in cfg.targets] == [
        ("vllm-fast", "fast", "https://127.0.0.1:8001"),
        ("vllm-slow", "slow", "https://127.0.0.1:8002"),
    ]
    assert cfg.probe.interval_s == 1.5 and cfg.server.port == 9464
    gw = cfg.gateway
    assert gw.ordered_lanes == ["fast", "slow"] and gw.effective_default_lane == "slow"
    assert gw.lanes["slow"].cacert == tmp_path / "slow-cert.pem"
    assert [(r.lane, r.max) for r in gw.rules.max_tokens] == [("fast", 32)]
    policy = load_policy(lay.policy_yaml)
    assert policy.shift_percents == (100,) and policy.recovery_stable_s < 60
    assert (
        load_yaml_model(lay.policy_yaml, PolicySpec).model_dump()
        == PolicySpec(**policy_config()).model_dump()
    )
    for name, token in tokens.items():
        path = lay.token_file(name)
        assert path.read_text().strip() == token and len(token) == 32
        assert path.stat().st_mode & 0o077 == 0  # secrets are the owner's only
    assert len(set(tokens.values())) == len(SECRETS) == 5  # each secret its own
    # every ingest path asks for the run's ingest token, and the gateway sends it
    assert cfg.ingest.token_file == gw.collector_token_file == lay.token_file("ingest")


def test_the_demo_guard_runs_behind_the_ingest_token(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    write_secrets(lay)
    write_configs(lay, guard=True)
    cfg = load_config(lay.lanewatch_yaml)
    assert cfg.guard.enabled and cfg.ingest.token_file == lay.token_file("ingest")
    assert yaml.safe_load(lay.prometheus_yaml.read_text())["rule_files"] == [str(DEMO_RULES)]


def test_the_lanes_serve_different_models_and_the_gateway_knows_which(tmp_path: Path) -> None:
    cfg = lanewatch_config(layout(tmp_path))
    probed = {t["lane"]: t["model"] for t in cfg["targets"]}
    assert probed == MODELS and len(set(probed.values())) == 2  # so a shift exercises the rewrite
    assert {lane: c["models"] for lane, c in cfg["gateway"]["lanes"].items()} == {
        lane: [model] for lane, model in MODELS.items()
    }
    sims = {
        name: argv
        for name, argv in commands(layout(tmp_path), Tools(None, None)).items()
        if name.startswith("sim-")
    }
    for lane, model in MODELS.items():
        argv = sims[f"sim-{lane}"]
        assert argv[argv.index("--model") + 1] == model


def test_the_demo_traffic_names_its_classes_and_the_gateway_takes_them(tmp_path: Path) -> None:
    gateway = LanewatchConfig.model_validate(lanewatch_config(layout(tmp_path))).gateway
    assert gateway.hints.trusted_networks == ["127.0.0.0/8"]  # the demo's own traffic, on loopback
    assert {c.name for c in DEFAULT_CLASSES} <= gateway.class_names


def test_missing_deploy_dir_names_the_file_and_the_install(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match=r"nowhere/prometheus/prometheus\.yml: cannot read .* install"):
        write_configs(layout(tmp_path), deploy_dir=tmp_path / "nowhere")
