"""The demo's LiteLLM proxy (`--router litellm`): a model group per lane with lanewatch's handler,
the handler's settings and degrade endpoint, the controller's litellm adapter, and the traffic
asking each class's model group."""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import sys
from pathlib import Path

import pytest
import yaml

from lanewatch.collector.config import load_config
from lanewatch.collector.degrade.adapters.litellm import LitellmSettings
from lanewatch.collector.demo.configs import (
    DEPLOY_DIR,
    LANES,
    MODEL,
    MODELS,
    Layout,
    prometheus_config,
    write_configs,
)
from lanewatch.collector.demo.litellm import (
    HANDLER,
    LitellmInstall,
    find_litellm,
    handler_settings,
    link_tree,
    proxy_command,
    proxy_config,
    write_cert_bundle,
    write_litellm_configs,
)
from lanewatch.collector.demo.stack import Tools, commands, process_envs, ready_urls
from lanewatch.collector.demo.supervisor import Supervisor
from lanewatch.collector.demo.traffic import MIX, Traffic, pick_class, routed_lane
from lanewatch.integrations.litellm.settings import settings_from

INSTALL = LitellmInstall(Path("/opt/litellm"))


def layout(tmp_path: Path, router: str = "litellm") -> Layout:
    return Layout(
        tmp_path, 8001, 8002, 9464, 8080, 9097, 9090, 9093, seed=3,
        router=router, litellm_port=4000, litellm_admin_port=4001,
    )  # fmt: skip


def test_each_lane_is_a_model_group_of_its_own_model_whose_deployment_id_is_the_lane(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    cfg = proxy_config(lay, MODELS)
    groups = {m["model_name"]: m for m in cfg["model_list"]}
    assert set(groups) == {MODELS[lane] for lane in LANES}
    for lane in LANES:
        entry = groups[MODELS[lane]]
        assert entry["model_info"]["id"] == lane  # LiteLLM answers with it in x-litellm-model-id
        assert entry["litellm_params"]["model"] == f"openai/{MODELS[lane]}"  # the model the lane's sim serves
        assert entry["litellm_params"]["api_base"] == f"https://127.0.0.1:{lay.lane_port(lane)}/v1"
    assert cfg["litellm_settings"]["callbacks"] == [HANDLER]
    assert lay.traffic_url == "http://127.0.0.1:4000"
    assert [lay.model(lane) for lane in LANES] == [MODELS[lane] for lane in LANES]


def test_the_handler_settings_map_each_group_to_its_lane_and_serve_the_degrade_endpoint(
    tmp_path: Path,
) -> None:
    lay = layout(tmp_path)
    settings = settings_from(handler_settings(lay, MODELS))  # the handler's own reader takes them
    assert settings.lanes == {MODELS["fast"]: "fast", MODELS["slow"]: "slow"}
    assert settings.order() == LANES
    assert settings.groups() == MODELS  # a shift to the fast lane asks for its model group
    assert (settings.admin_host, settings.admin_port) == ("127.0.0.1", 4001)
    assert settings.admin_token_file == lay.token_file("litellm-admin")
    assert settings.collector_url == lay.collector_url and settings.trust_class_header

    write_litellm_configs(lay, MODELS)
    assert yaml.safe_load(lay.litellm_yaml.read_text()) == proxy_config(lay, MODELS)
    assert json.loads(lay.litellm_settings.read_text()) == handler_settings(lay, MODELS)


def test_the_controller_drives_the_handler_and_no_gateway_runs(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    cmds = commands(lay, Tools(None, None, litellm=INSTALL))
    assert "gateway" not in cmds
    proxy = cmds["litellm"]
    assert proxy[:2] == [str(INSTALL.python), str(INSTALL.command)]
    assert proxy[proxy.index("--port") + 1] == "4000" and proxy[proxy.index("--num_workers") + 1] == "1"
    degrade = cmds["degrade"]
    assert "--gateway" not in degrade and degrade[degrade.index("--adapter") + 1] == "litellm"
    assert ready_urls(lay)["litellm"] == "http://127.0.0.1:4000/health/liveliness"
    with pytest.raises(ValueError, match="no LiteLLM proxy"):
        commands(lay, Tools(None, None))

    write_configs(lay)
    cfg = load_config(lay.lanewatch_yaml)  # the collector's and the controller's config validates
    [adapter] = cfg.degrade.adapters
    assert isinstance(adapter, LitellmSettings)
    assert str(adapter.url).rstrip("/") == "http://127.0.0.1:4001"
    assert adapter.token_file == lay.token_file("litellm-admin")
    prom = yaml.safe_load((DEPLOY_DIR / "prometheus" / "prometheus.yml").read_text())
    assert "lanewatch-gateway" not in {j["job_name"] for j in prometheus_config(prom, lay)["scrape_configs"]}
    assert "litellm" not in commands(layout(tmp_path, "gateway"), Tools(None, None, litellm=INSTALL))


def test_the_proxy_gets_the_handler_on_its_path_the_lanes_certificates_and_no_database(
    tmp_path: Path,
) -> None:
    lay = layout(tmp_path)
    env = process_envs(lay, Tools(None, None, litellm=INSTALL), None)["litellm"]
    assert env["LANEWATCH_LITELLM_CONFIG"] == str(lay.litellm_settings)
    assert env["SSL_VERIFY"] == str(lay.litellm_cert_bundle)
    assert env["DATABASE_URL"] is None and env["LITELLM_MASTER_KEY"] is None  # removed, not emptied
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert proxy_command(lay, INSTALL)[1] == env

    path = link_tree(
        Path(str(env["PYTHONPATH"]))
    )  # the wheel's layout: lanewatch/collector, .../integrations
    assert (path / "lanewatch" / "collector" / "demo" / "litellm.py").is_file()
    assert (path / "lanewatch" / "integrations" / "litellm" / "handler.py").is_file()
    assert link_tree(path) == path  # made once per run; again is harmless

    lay.litellm_cert_bundle.parent.mkdir(parents=True, exist_ok=True)
    for lane in LANES:
        cert = lay.cert(lane)
        assert cert is not None
        cert.write_text(f"-----BEGIN CERTIFICATE-----\n{lane}\n-----END CERTIFICATE-----\n")
    assert write_cert_bundle(lay).read_text().count("BEGIN CERTIFICATE") == 2


def test_a_none_in_a_childs_environment_removes_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://nowhere")
    monkeypatch.setenv("LANEWATCH_KEPT", "yes")
    names = ("DATABASE_URL", "LANEWATCH_KEPT", "ADDED")
    code = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {names!r}}}))"
    with Supervisor() as sup:
        child = sup.start(
            "env", [sys.executable, "-c", code], tmp_path / "env.log", {"DATABASE_URL": None, "ADDED": "1"}
        )
        assert child.proc.wait(timeout=30) == 0
    assert json.loads(child.log_path.read_text()) == {
        "DATABASE_URL": None,
        "LANEWATCH_KEPT": "yes",
        "ADDED": "1",
    }
    assert os.environ["DATABASE_URL"] == "postgres://nowhere"  # the demo's own environment is untouched


def test_the_traffic_asks_each_class_for_its_lanes_model_group() -> None:
    traffic = Traffic("http://127.0.0.1:4000", MODEL, 1.0, models=MODELS, lane_header="x-litellm-model-id")
    plain = Traffic("http://127.0.0.1:8080", MODEL, 1.0)
    rng = random.Random(1)
    seen = set()
    for _ in range(50):
        cls = pick_class(rng, MIX)
        assert traffic.model_for(cls) == MODELS[routed_lane(cls)]
        assert plain.model_for(cls) == MODEL  # behind the gateway one name: the gateway picks the tier
        seen.add(routed_lane(cls))
    assert seen == set(LANES)


def test_without_a_litellm_proxy_the_demo_says_so_and_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from lanewatch.collector.demo import Options, run_demo

    monkeypatch.setattr(Tools, "find", classmethod(lambda cls: cls("/bin/prometheus", "/bin/am", None, None)))
    result = asyncio.run(
        run_demo(Options(router="litellm", live=False), Console(file=io.StringIO()), asyncio.Event())
    )
    assert result.error is not None and "make litellm" in result.error and "litellm[proxy]==" in result.error
    assert result.events == []


def test_the_proxy_is_found_beside_this_python_or_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "lanewatch-venv" / "bin" / "python"))
    assert find_litellm({"LANEWATCH_CACHE": str(tmp_path / "cache")}) is None
    cached = tmp_path / "cache" / "litellm-1.106.12" / "bin"
    cached.mkdir(parents=True)
    (cached / "python").write_text("")
    (cached / "litellm").write_text("")
    found = find_litellm({"LANEWATCH_CACHE": str(tmp_path / "cache")})
    assert found is not None and found.root == cached.parent
    beside = tmp_path / "lanewatch-venv" / "bin"
    beside.mkdir(parents=True)
    (beside / "python").write_text("")
    (beside / "litellm").write_text("")
    found = find_litellm({"LANEWATCH_CACHE": str(tmp_path / "cache")})
    assert found is not None and found.root == beside.parent
