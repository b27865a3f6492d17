"""`lanewatch degrade envoy-routes`: Envoy's first route file, the template with no lane degraded."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from tests.layout import ROOT

TEMPLATE = ROOT / "deploy" / "envoy" / "routes.template.yaml"


def _invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, ["degrade", "envoy-routes", *args])
    return res.exit_code, res.stdout, res.stderr


def test_the_file_is_one_route_resource_holding_the_templates_routes_as_written(tmp_path: Path) -> None:
    out = tmp_path / "new" / "routes.yaml"  # its folder is made
    code, stdout, _ = _invoke("--out", str(out))
    assert code == 0 and stdout.startswith(f"wrote {out} from ")
    assert Path(stdout.split(" from ")[1].strip()).resolve() == TEMPLATE.resolve()  # the shipped one
    (resource,) = yaml.safe_load(out.read_text())["resources"]
    assert resource.pop("@type") == "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
    assert resource == yaml.safe_load(TEMPLATE.read_text())["route_config"]


def test_a_file_that_is_there_is_replaced_only_with_force(tmp_path: Path) -> None:
    out = tmp_path / "routes.yaml"
    out.write_text("held: a live degrade\n")
    code, _, err = _invoke("--out", str(out), "--template", str(TEMPLATE))
    assert code == 2 and "exists" in err and "--force" in err
    assert out.read_text() == "held: a live degrade\n"
    assert _invoke("--out", str(out), "--force")[0] == 0
    assert "resources" in yaml.safe_load(out.read_text())


def test_a_bad_template_exits_2_naming_the_file_and_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "t.yaml"
    bad.write_text("route_config: {name: lanes}\nroutez: []\n")
    code, _, err = _invoke("--out", str(tmp_path / "r.yaml"), "--template", str(bad))
    assert code == 2 and f"{bad}: route template: unknown keys ['routez']" in err
    assert not (tmp_path / "r.yaml").exists()
