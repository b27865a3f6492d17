"""The generated rules, and the PrometheusRule built from them, pass the real promtool (Prometheus 2.42)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from lanewatch.alerts.build import GENERATED_DIR, KUBERNETES_DIR
from tests.conftest import require_binary

TESTS_DIR = GENERATED_DIR.parent / "tests"
pytestmark = pytest.mark.integration  # runs the real promtool binary


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool; the result carries its output for assertion messages."""
    binary = require_binary("promtool")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=240, check=False, cwd=cwd)


def test_generated_rule_files_pass_check_rules() -> None:
    files = sorted(str(p) for p in GENERATED_DIR.glob("*.yml"))
    assert len(files) == 3
    result = promtool("check", "rules", *files)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == 3


def test_prometheus_rule_groups_pass_check_rules(tmp_path: Path) -> None:
    for manifest_path in sorted(KUBERNETES_DIR.glob("prometheusrule-*.yaml")):
        manifest = yaml.safe_load(manifest_path.read_text())
        rule_file = tmp_path / f"{manifest_path.stem}.yml"
        rule_file.write_text(yaml.safe_dump({"groups": manifest["spec"]["groups"]}))
        result = promtool("check", "rules", str(rule_file))
        assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass() -> None:
    files = sorted(p.name for p in TESTS_DIR.glob("*.yml"))
    required = {"burnrate.yml", "thresholds.yml", "lanes.yml", "demo.yml", "demo-vllm.yml", "diagnosis.yml"}
    assert required <= set(files)
    result = promtool("test", "rules", *files, cwd=TESTS_DIR)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(files)


def test_promtool_unit_tests_catch_a_broken_rule(tmp_path: Path) -> None:
    """The tests can fail: weaken the TTFT page factor and the near miss must now fire."""
    rules_text = (GENERATED_DIR / "lanewatch-rules.yml").read_text().replace("(5.6 * 0.01)", "(0.5 * 0.01)")
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "lanewatch-rules.yml").write_text(rules_text)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "burnrate.yml").write_text((TESTS_DIR / "burnrate.yml").read_text())
    result = promtool("test", "rules", "burnrate.yml", cwd=tmp_path / "tests")
    assert result.returncode != 0
    assert "near miss for page" in result.stdout + result.stderr
