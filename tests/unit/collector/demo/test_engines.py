"""The demo on real engines: finding the vLLM install, each lane's command, its configs, the burst."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lanewatch.alerts.build import rule_file_name
from lanewatch.alerts.spec import load_spec
from lanewatch.collector.config import load_config
from lanewatch.collector.demo.burst import BurstSpec, burst_body, open_for
from lanewatch.collector.demo.configs import (
    DEMO_RULES,
    DEPLOY_DIR,
    MODELS,
    Layout,
    lanewatch_config,
    prometheus_config,
    write_configs,
)
from lanewatch.collector.demo.engines import (
    CPU_ENV,
    SIM_SIZING,
    VLLM_CLASSES,
    VLLM_SIZING,
    EngineMissing,
    VllmInstall,
    default_vllm_root,
    find_vllm,
    vllm_command,
)
from lanewatch.collector.demo.run import Options
from lanewatch.collector.demo.stack import Tools, commands, lane_envs, lane_process, process_envs, ready_urls
from lanewatch.collector.demo.timeline import DEFAULT_FAULT, Plan


def vllm_layout(tmp_path: Path, lanes: frozenset[str] = frozenset({"fast", "slow"})) -> Layout:
    return Layout(tmp_path, 8001, 8002, 9464, 8080, 9097, 9090, 9093, seed=3, vllm_lanes=lanes)


def fake_install(root: Path, models: tuple[str, ...] = ("tiny", "small")) -> VllmInstall:
    (root / "venv" / "bin").mkdir(parents=True)
    (root / "venv" / "bin" / "vllm").write_text("#!/bin/sh\n")
    for name in models:
        (root / "models" / name).mkdir(parents=True)
        (root / "models" / name / "config.json").write_text("{}")
    return VllmInstall(root)


def test_the_default_install_is_in_the_cache_make_vllm_fills() -> None:
    assert default_vllm_root({"LANEWATCH_CACHE": "/c"}) == Path("/c/vllm-0.32.0")
    assert default_vllm_root({}) == Path.home() / ".cache" / "lanewatch" / "vllm-0.32.0"


def test_a_missing_install_is_one_line_naming_make_vllm(tmp_path: Path) -> None:
    with pytest.raises(EngineMissing) as err:
        find_vllm(tmp_path / "nothing", ("fast", "slow"))
    msg = str(err.value)
    assert "\n" not in msg and "`make vllm`" in msg and str(tmp_path / "nothing") in msg


def test_a_missing_model_is_named(tmp_path: Path) -> None:
    fake_install(tmp_path, models=("tiny",))
    assert find_vllm(tmp_path, ("fast",)).root == tmp_path  # the fast lane needs only tiny
    with pytest.raises(EngineMissing, match=r"models/small/config.json is missing"):
        find_vllm(tmp_path, ("fast", "slow"))


def test_a_vllm_lane_serves_its_model_under_the_lanes_name_with_spans_over_http(tmp_path: Path) -> None:
    inst = fake_install(tmp_path)
    argv, env = vllm_command(inst, "slow", 8002, "lanewatch-demo-big", "http://127.0.0.1:9464/v1/traces")
    assert argv[:3] == [str(inst.vllm), "serve", str(tmp_path / "models" / "small")]
    flags = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert flags["--served-model-name"] == "lanewatch-demo-big"
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "8002"
    assert flags["--otlp-traces-endpoint"] == "http://127.0.0.1:9464/v1/traces"
    assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
    assert flags["--dtype"] == "float32" and flags["-O"] == "0"  # AVX2 cores emulate bfloat16; no compile
    assert env == {**CPU_ENV, "OMP_NUM_THREADS": "1"}  # two engines on a small machine: a thread each


def test_vllm_lanes_are_plain_http_without_certificates(tmp_path: Path) -> None:
    lay = vllm_layout(tmp_path, frozenset({"slow"}))
    assert lay.lane_url("slow") == "http://127.0.0.1:8002" and lay.cert("slow") is None
    assert lay.lane_url("fast") == "https://127.0.0.1:8001" and lay.cert("fast") == tmp_path / "fast-cert.pem"
    cfg = lanewatch_config(lay, classes=VLLM_CLASSES, timeouts={"ttft_s": 120.0}, fast_max_tokens=8)
    targets = {t["lane"]: t for t in cfg["targets"]}
    assert "cacert" not in targets["slow"] and targets["fast"]["cacert"] == str(lay.cert("fast"))
    assert cfg["gateway"]["lanes"]["slow"] == {
        "upstreams": ["http://127.0.0.1:8002"],
        "models": [MODELS["slow"]],
    }
    assert cfg["probe"]["timeouts"] == {"ttft_s": 120.0}
    assert cfg["gateway"]["rules"] == {"max_tokens": [{"lane": "fast", "max": 8}]}
    assert [c["name"] for c in cfg["probe"]["classes"]] == ["short", "summary", "story"]
    (tmp_path / "lanewatch.yaml").write_text(yaml.safe_dump(cfg))
    parsed = load_config(tmp_path / "lanewatch.yaml")
    assert [c.max_tokens for c in parsed.probe.classes] == [c.max_tokens for c in VLLM_CLASSES]

    prom = prometheus_config(yaml.safe_load((DEPLOY_DIR / "prometheus/prometheus.yml").read_text()), lay)
    jobs = {j["job_name"]: j for j in prom["scrape_configs"]}
    assert "scheme" not in jobs["vllm-slow"] and "tls_config" not in jobs["vllm-slow"]
    assert jobs["vllm-fast"]["scheme"] == "https"


def _rule_names(path: Path) -> set[str]:
    groups = yaml.safe_load(path.read_text())["groups"]
    return {r.get("record") or r["alert"] for g in groups for r in g["rules"]}


def test_the_real_engine_demo_loads_the_committed_rules_of_its_own_spec(tmp_path: Path) -> None:
    lay = vllm_layout(tmp_path)
    assert VLLM_SIZING.slo_spec is not None and SIM_SIZING.slo_spec is None
    rules = VLLM_SIZING.rules
    assert rules is not None and rules.name == rule_file_name(load_spec(VLLM_SIZING.slo_spec))
    write_configs(lay, classes=VLLM_SIZING.classes, rules=rules, slo_spec=VLLM_SIZING.slo_spec)
    assert yaml.safe_load(lay.prometheus_yaml.read_text())["rule_files"] == [str(rules)]
    # The collector judges goodput by the same SLOs.
    exported = yaml.safe_load(lay.lanewatch_yaml.read_text())["export"]
    assert exported["slo_spec"] == str(VLLM_SIZING.slo_spec)
    # The same alerts and SLO series as the simulator's demo rules (the dashboards read both),
    # with the real engines' thresholds and windows.
    dashboards = {"slo:current_burn_rate:ratio", "slo:error_budget:ratio", "slo:period_burn_rate:ratio"}
    assert {n for n in _rule_names(DEMO_RULES) if not n.startswith("slo:sli_error")} <= _rule_names(rules)
    assert dashboards <= _rule_names(rules)
    assert "slo:sli_error:ratio_rate45s" in _rule_names(rules)
    text = rules.read_text()
    assert "slow-lane requests should see TTFT ≤ 7.5s" in text
    assert "fast-lane requests should see TTFT ≤ 10s" in text


def test_commands_run_vllm_for_vllm_lanes_and_the_simulator_for_the_rest(tmp_path: Path) -> None:
    inst = fake_install(tmp_path / "cache")
    lay = vllm_layout(tmp_path, frozenset({"slow"}))
    cmds = commands(lay, Tools(None, None), inst)
    assert lane_process(lay, "slow") == "vllm-slow" and lane_process(lay, "fast") == "sim-fast"
    assert cmds["vllm-slow"][0] == str(inst.vllm) and "sim-slow" not in cmds
    assert cmds["sim-fast"][1] == "sim"
    assert list(cmds)[:2] == ["sim-fast", "vllm-slow"]  # the lanes start first
    assert ready_urls(lay)["vllm-slow"] == "http://127.0.0.1:8002/health"
    assert set(lane_envs(lay, inst)) == {"vllm-slow"}
    with pytest.raises(ValueError, match="lane slow is a vLLM lane"):
        commands(lay, Tools(None, None), None)


def test_every_lanes_span_exporter_sends_the_ingest_token(tmp_path: Path) -> None:
    inst = fake_install(tmp_path / "cache")
    lay = vllm_layout(tmp_path, frozenset({"slow"}))
    envs = process_envs(lay, Tools(None, None), inst, "f00d")
    header = "authorization=Bearer%20f00d"  # OTel's header variable: URL-encoded values
    assert envs["sim-fast"]["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] == header
    assert envs["vllm-slow"]["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] == header
    assert "OTEL_EXPORTER_OTLP_TRACES_HEADERS" not in process_envs(lay, Tools(None, None), inst).get(
        "vllm-slow", {}
    )


def test_options_pick_the_lanes_a_real_engine_serves() -> None:
    assert Options().vllm_lanes == frozenset()
    assert Options(engine="vllm").vllm_lanes == frozenset({"fast", "slow"})
    assert Options(engine="vllm", fast_on_sim=True).vllm_lanes == frozenset({"slow"})


def test_the_real_engine_plan_replaces_the_simulator_fault_with_a_burst() -> None:
    plan = VLLM_SIZING.plan(Plan())
    assert VLLM_SIZING.burst is not None
    assert plan.fault == {"burst": {**vars(VLLM_SIZING.burst)}}
    assert plan.max_fault_s >= Plan().max_fault_s
    assert SIM_SIZING.plan(Plan()).fault == DEFAULT_FAULT


def test_each_burst_prompt_is_long_and_new() -> None:
    spec = BurstSpec(concurrency=2, prompt_words=50, max_tokens=4)
    a, b = burst_body(spec, "m", 1), burst_body(spec, "m", 2)
    text_a, text_b = a["messages"][0]["content"], b["messages"][0]["content"]
    assert len(text_a.split()) == 51 and text_a != text_b
    assert set(text_a.split()[1:]).isdisjoint(text_b.split()[1:])  # no shared prefix to cache
    assert a["model"] == "m" and a["max_tokens"] == 4 and a["stream"] is True and a["ignore_eos"] is True


def test_real_engine_classes_keep_the_routing_and_fit_the_models() -> None:
    fast = [c.name for c in VLLM_CLASSES if c.max_tokens <= VLLM_SIZING.fast_max_tokens]
    assert fast == ["short"]  # the gateway's rule sends only short answers to the fast lane
    assert max(c.prompt_words for c in VLLM_CLASSES) * 4 < 4096  # well inside --max-model-len


def test_the_cli_without_the_vllm_install_fails_in_one_line_naming_make_vllm(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lanewatch.collector.cli import app

    result = CliRunner().invoke(app, ["demo", "--engine", "vllm", "--vllm-root", str(tmp_path), "--no-live"])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "`make vllm`" in lines[0] and str(tmp_path) in lines[0], result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--engine", "gpu"], "--engine gpu: expected one of sim, vllm"),
        (["--fast-lane-sim"], "need --engine vllm"),
    ],
)
def test_the_cli_refuses_a_bad_engine_choice(args: list[str], says: str) -> None:
    from typer.testing import CliRunner

    from lanewatch.collector.cli import app

    result = CliRunner().invoke(app, ["demo", *args])
    assert result.exit_code == 2 and says in result.output


def test_a_burst_opens_enough_prompts_to_queue_its_slos_within_its_ceiling() -> None:
    spec = BurstSpec(concurrency=16, prompt_words=250, max_tokens=4, queue_slos=5.0)
    assert open_for(spec, 7.5, 7.5) == 5  # one AVX2 core: the small model prefills a prompt in ~7 s
    assert open_for(spec, 2.0, 7.5) == 16  # a faster machine: 19 asked, 16 at most
    assert open_for(spec, 3.0, 7.5) == 13  # 37.5 s / 3 s, rounded up
    assert open_for(spec, 100.0, 7.5) == 1  # at least one
    assert open_for(spec, None, 7.5) == 16  # the solo prompt failed: the most
    assert open_for(spec, 3.0, None) == 16  # no SLO to size by
    assert open_for(BurstSpec(concurrency=4), 3.0, 7.5) == 4  # no queue goal: `concurrency` at once
