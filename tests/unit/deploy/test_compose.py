"""deploy/compose and the configs it mounts hang together: paths exist, flags and ports agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lanewatch.alerts.build import GENERATED_DIR
from lanewatch.collector.config import load_config
from lanewatch.collector.degrade.adapters import GatewaySettings

DEPLOY = GENERATED_DIR.parent.parent / "deploy"
COMPOSE = DEPLOY / "compose"


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    return data


def mounts(service: str) -> dict[str, Path]:
    """Container path -> host path (resolved from the compose folder) of a service's bind mounts."""
    out = {}
    for volume in compose()["services"][service].get("volumes", []):
        host, container = volume.split(":")[:2]
        if host.startswith("."):
            out[container] = (COMPOSE / host).resolve()
    return out


def test_every_bind_mount_but_the_secrets_exists() -> None:
    for service in compose()["services"]:
        for container, host in mounts(service).items():
            if "/secrets/" in container:
                assert host.parent.name == "secrets"  # created by hand, ignored by git
                continue
            assert host.exists(), f"{service}: {host} (for {container}) is missing"


def test_vllm_lanes_export_spans_to_the_collector() -> None:
    services = compose()["services"]
    for name in ("vllm-fast", "vllm-slow"):
        service = services[name]
        assert service["image"].startswith("vllm/vllm-openai:")
        flags = service["command"]
        for flag in ("--enable-prefix-caching", "--enable-chunked-prefill", "--enable-request-id-headers"):
            assert flag in flags
        assert "--otlp-traces-endpoint=http://collector:9464/v1/traces" in flags
        assert service["environment"]["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"


def test_prometheus_gets_the_default_rules_and_its_scrape_targets_exist() -> None:
    services = compose()["services"]
    assert services["prometheus"]["image"] == "prom/prometheus:v2.42.0"
    assert services["alertmanager"]["image"] == "prom/alertmanager:v0.25.0"
    rules = mounts("prometheus")["/etc/prometheus/rules/lanewatch-rules.yml"]
    assert rules == GENERATED_DIR / "lanewatch-rules.yml"
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] == ["rules/*.yml"]
    for job in config["scrape_configs"]:
        for static in job["static_configs"]:
            for target in static["targets"]:
                host = target.split(":")[0]
                assert host in services, f"{job['job_name']} scrapes {target}, not a compose service"


def test_grafana_loads_the_generated_dashboards() -> None:
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/lanewatch.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    assert mounts("grafana")[path] == GENERATED_DIR.parent.parent / "dashboards" / "generated"
    datasource = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"


def test_alertmanager_reaches_the_degrade_controller_of_compose() -> None:
    config = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text())
    (receiver,) = [r for r in config["receivers"] if r["name"] == "lanewatch-degrade"]
    (hook,) = receiver["webhook_configs"]
    assert hook["url"] == "http://degrade:9097/alertmanager"
    assert "--port=9097" in compose()["services"]["degrade"]["command"]
    credentials = hook["http_config"]["authorization"]["credentials_file"]
    assert credentials in {m.split(":")[1] for m in compose()["services"]["alertmanager"]["volumes"]}


def test_the_lanewatch_config_loads() -> None:
    cfg = load_config(COMPOSE / "lanewatch.yaml")
    models = {t.name: t.model for t in cfg.targets}
    for name in ("vllm-fast", "vllm-slow"):
        assert f"--model={models[name]}" in compose()["services"][name]["command"]


def test_the_controller_drives_the_compose_gateway_with_its_admin_token() -> None:
    cfg = load_config(COMPOSE / "lanewatch.yaml")
    (entry,) = cfg.degrade.adapters
    assert isinstance(entry, GatewaySettings) and entry.url == "http://gateway:8080"
    degrade = compose()["services"]["degrade"]
    assert "--config=/etc/lanewatch/lanewatch.yaml" in degrade["command"]
    mounts = {m.split(":")[1] for m in degrade["volumes"]}
    assert {
        "/etc/lanewatch/lanewatch.yaml",
        str(entry.token_file),
        str(cfg.gateway.admin_token_file),
    } <= mounts


def test_each_gateway_lane_declares_the_model_its_vllm_serves() -> None:
    cfg = load_config(COMPOSE / "lanewatch.yaml")
    for lane in ("fast", "slow"):
        assert cfg.gateway.lanes[lane].models == [t.model for t in cfg.targets if t.lane == lane], (
            f"lane {lane}: gateway models and the target's model differ"
        )
        (model,) = cfg.gateway.lanes[lane].models
        assert f"--model={model}" in compose()["services"][f"vllm-{lane}"]["command"]
    assert cfg.gateway.lanes["fast"].models != cfg.gateway.lanes["slow"].models  # a shift rewrites


def test_the_collector_and_its_senders_share_the_ingest_tokens_made_at_start() -> None:
    services = compose()["services"]
    tokens = services["tokens"]
    assert tokens["entrypoint"] == ["python", "/src/deploy/compose/make_tokens.py"]
    folder, *names = tokens["command"][: tokens["command"].index("--owner")]
    assert f"ingest-tokens:{folder}" in tokens["volumes"]
    cfg = load_config(COMPOSE / "lanewatch.yaml")
    reporters = {r.name: r for r in cfg.ingest.reporters}
    assert sorted(names) == sorted(reporters) and cfg.ingest.token_file is None
    assert all(str(r.token_file) == f"{folder}/{r.name}" for r in reporters.values())
    # the gateway sends its own reporter's token, under that reporter's name
    gateway = reporters[cfg.gateway.reporter_name]
    assert cfg.gateway.collector_token_file == gateway.token_file and gateway.feeds == ["progress", "tap"]
    assert reporters["vllm"].feeds == []  # spans only: no progress, no records
    for name in ("collector", "gateway", "vllm-fast", "vllm-slow"):
        assert f"ingest-tokens:{folder}:ro" in services[name]["volumes"], name
        assert services[name]["depends_on"]["tokens"] == {"condition": "service_completed_successfully"}
        # vLLM's exporter reads its token at start ($$ is compose's escape for a shell's $)
        if name.startswith("vllm-"):
            script = services[name]["entrypoint"][2].replace("$$", "$")
            token = reporters["vllm"].token_file
            header = f'OTEL_EXPORTER_OTLP_TRACES_HEADERS="authorization=Bearer%20$(cat {token})"'
            assert f"export {header};" in script
            assert 'exec python3 -m vllm.entrypoints.openai.api_server "$@"' in script


def test_the_compose_collector_starts_its_guard_behind_the_tokens_and_not_without(tmp_path: Path) -> None:
    """The shipped config as the collector loads it, its tokens made by the `tokens` step's script."""
    from fastapi.testclient import TestClient

    from deploy.compose.make_tokens import make_tokens
    from lanewatch.collector.collect.service import CollectorService
    from lanewatch.collector.common.errors import ConfigError

    data = yaml.safe_load((COMPOSE / "lanewatch.yaml").read_text())
    assert data["guard"]["enabled"] is True and data["server"]["host"] == "0.0.0.0"
    assert make_tokens(tmp_path, ["gateway", "vllm"]) == ["gateway", "vllm"]
    assert make_tokens(tmp_path, ["gateway", "vllm"]) == []  # kept across restarts
    assert (tmp_path / "gateway").stat().st_mode & 0o077 == 0
    for r in data["ingest"]["reporters"]:
        r["token_file"] = str(tmp_path / Path(r["token_file"]).name)
    here = tmp_path / "lanewatch.yaml"
    here.write_text(yaml.safe_dump(data))
    service = CollectorService.from_config(load_config(here), source_factory=None)
    assert service.guard is not None and not service.ingest_auth.open
    body = b'{"reporter": "gateway-host-1", "events": [[1, "fast", 9.0, false]]}'
    json_ = {"content-type": "application/json"}
    client = TestClient(service.app())

    def bearer(name: str) -> dict[str, str]:
        return {**json_, "authorization": f"Bearer {(tmp_path / name).read_text().strip()}"}

    assert client.post("/v1/progress", content=body, headers=json_).status_code == 401
    assert client.post("/v1/progress", content=body, headers=bearer("vllm")).status_code == 403
    assert client.post("/v1/progress", content=body, headers=bearer("gateway")).status_code == 200
    # the same config without its tokens: refused, naming the setting
    del data["ingest"]
    here.write_text(yaml.safe_dump(data))
    needs = r"guard\.enabled needs ingest\.token_file \(or ingest\.reporters\)"
    with pytest.raises(ConfigError, match=needs):
        load_config(here)
