"""Generated rule files are golden: rebuilding them must leave the committed files unchanged."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from lanewatch.alerts import build
from lanewatch.alerts.spec import BUNDLED_SPECS
from lanewatch.collector.cli import app

STALE = "stale: run `lanewatch alerts build` (or `make generate`) and commit the result"


def test_committed_rule_files_are_fresh() -> None:
    outputs = build.bundled_outputs()
    assert {p.name for p in outputs} == {
        "lanewatch-rules.yml",
        "lanewatch-demo-rules.yml",
        "lanewatch-demo-vllm-rules.yml",
        "prometheusrule-lanewatch.yaml",
    }
    for path, text in outputs.items():
        assert path.exists(), f"{path} missing: {STALE}"
        assert path.read_text(encoding="utf-8") == text, f"{path} {STALE}"


def test_cli_rebuilds_into_a_folder_identically(tmp_path: Path) -> None:
    args = ["alerts", "build", "--out", str(tmp_path), "--kubernetes", str(tmp_path / "k8s")]
    for spec in BUNDLED_SPECS:
        args += ["--spec", str(spec)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    for name in ("lanewatch-rules.yml", "lanewatch-demo-rules.yml", "lanewatch-demo-vllm-rules.yml"):
        assert (tmp_path / name).read_text() == (build.GENERATED_DIR / name).read_text(), f"{name} {STALE}"
    committed = build.KUBERNETES_DIR / "prometheusrule-lanewatch.yaml"
    assert (tmp_path / "k8s" / "prometheusrule-lanewatch.yaml").read_text() == committed.read_text()
    assert "unchanged" not in result.output  # a fresh folder: every file written


def test_write_reports_only_changed_files(tmp_path: Path) -> None:
    path = tmp_path / "a.yml"
    assert build.write({path: "x"}) == [path]
    assert build.write({path: "x"}) == []
    assert build.write({path: "y"}) == [path]


def test_prometheus_rule_carries_the_rule_file_groups() -> None:
    rules = yaml.safe_load((build.GENERATED_DIR / "lanewatch-rules.yml").read_text())
    manifest = yaml.safe_load((build.KUBERNETES_DIR / "prometheusrule-lanewatch.yaml").read_text())
    assert manifest["spec"]["groups"] == rules["groups"]
