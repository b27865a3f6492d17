"""A router's config is refused at start, not in an incident: every state the policy can ask for,
rendered dry by each adapter, by `lanewatch config check` and by the controller."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.degrade import preflight
from lanewatch.collector.degrade.adapters import EnvoySettings, NginxSettings
from lanewatch.collector.degrade.policy import DEFAULT_POLICY
from lanewatch.collector.degrade.state import LaneSpec
from tests.layout import ROOT

SHIPPED = ROOT / "deploy" / "envoy" / "routes.template.yaml"
# The fast lane's route takes /fast/ only, and the batch class is a path no lane route has: a
# shed of batch on the fast lane would refuse nothing, so the Envoy adapter refuses to render it.
DISJOINT = "{prefix: '/batch/'}"


def disjoint_template(folder: Path) -> Path:
    data = yaml.safe_load(SHIPPED.read_text())
    routes = data["route_config"]["virtual_hosts"][0]["routes"]
    routes[0]["match"] = {"prefix": "/slow/"}
    routes[1]["match"] = {"prefix": "/fast/"}
    data["classes"]["batch"] = {"prefix": "/batch/"}
    path = folder / "routes.template.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def envoy_config(tmp_path: Path, template: Path) -> Path:
    (tmp_path / "routes").mkdir(exist_ok=True)
    config = tmp_path / "lanewatch.yaml"
    entry = {
        "kind": "envoy",
        "route_template": str(template),
        "route_file": str(tmp_path / "routes" / "r.yaml"),
    }
    config.write_text(yaml.safe_dump({"degrade": {"adapters": [entry]}}))
    return config


def test_the_policys_states_are_each_step_on_each_lane_a_shift_beside_its_guard_and_all_at_once() -> None:
    states = dict(preflight.rehearsals(DEFAULT_POLICY))
    guard = LaneSpec(cap_max_tokens=256, shed_classes=("batch",))
    assert states["lane slow shifted 50% to fast"] == {"slow": LaneSpec("fast", 50)}
    assert states["lane slow shifted 100% to fast"] == {"slow": LaneSpec("fast", 100)}
    assert states["lane fast protected (cap_max_tokens 256; shed batch)"] == {"fast": guard}
    assert states["lane slow protected (cap_max_tokens 256; shed batch)"] == {"slow": guard}  # convergence
    beside = "lane slow shifted 50% to fast while fast is protected (cap_max_tokens 256; shed batch)"
    assert states[beside] == {"slow": LaneSpec("fast", 50), "fast": guard}
    every = states["every lane degraded at once (shifted 100%, protected: cap_max_tokens 256; shed batch)"]
    assert every == {"fast": guard, "slow": LaneSpec("fast", 100, 256, ("batch",))}
    assert not any("fast shifted" in what for what in states)  # the fastest lane has nowhere to go


def test_the_shipped_envoy_template_and_nginx_lanes_render_every_state(tmp_path: Path) -> None:
    entries = [
        EnvoySettings(route_template=SHIPPED, route_file=tmp_path / "routes.yaml"),
        NginxSettings(include_file=tmp_path / "lanes.conf"),
    ]
    assert preflight.refusals(DEFAULT_POLICY, entries) == []


def test_a_class_rule_no_lane_path_can_match_is_refused_naming_the_rule(tmp_path: Path) -> None:
    entry = EnvoySettings(route_template=disjoint_template(tmp_path), route_file=tmp_path / "routes.yaml")
    with pytest.raises(ConfigError) as caught:
        preflight.check(DEFAULT_POLICY, [entry])
    text = str(caught.value)
    assert "degrade.adapters.0 (envoy) would refuse lane fast protected" in text
    assert f"class's path rule {DISJOINT}" in text and "match no path together" in text
    assert "nothing applied" in text
    assert not (tmp_path / "routes.yaml").exists()  # a dry render writes nothing


def test_a_lane_the_router_does_not_know_is_refused(tmp_path: Path) -> None:
    entry = NginxSettings(include_file=tmp_path / "lanes.conf", lanes=["fast", "other"])
    [found] = preflight.refusals(DEFAULT_POLICY, [entry])
    assert "degrade.adapters.0 (nginx) would refuse lane slow shifted 50% to fast" in found
    assert "lane 'slow' is not one of the nginx lanes" in found
    assert not (tmp_path / "lanes.conf").exists()


def test_config_check_exits_non_zero_on_what_an_adapter_would_refuse(tmp_path: Path) -> None:
    runner = CliRunner()
    good = runner.invoke(app, ["config", "check", str(envoy_config(tmp_path, SHIPPED))])
    assert good.exit_code == 0, good.output
    bad = runner.invoke(app, ["config", "check", str(envoy_config(tmp_path, disjoint_template(tmp_path)))])
    assert bad.exit_code == 1, bad.output
    assert "would refuse lane fast protected" in bad.output and DISJOINT in bad.output
