"""deploy/prometheus and deploy/alertmanager pass the real promtool 2.42 and amtool 0.25."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lanewatch.alerts.build import GENERATED_DIR
from tests.conftest import require_binary

pytestmark = pytest.mark.integration  # runs the real promtool and amtool binaries

DEPLOY = GENERATED_DIR.parent.parent / "deploy"
ALERTMANAGER = DEPLOY / "alertmanager" / "alertmanager.yml"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run a tool; the result carries its output for assertion messages."""
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, check=False)


def test_prometheus_config_and_its_rules_pass_check_config(tmp_path: Path) -> None:
    """Laid out as deploy/compose mounts it: the config, and the default rules under rules/."""
    shutil.copy(DEPLOY / "prometheus" / "prometheus.yml", tmp_path / "prometheus.yml")
    (tmp_path / "rules").mkdir()
    shutil.copy(GENERATED_DIR / "lanewatch-rules.yml", tmp_path / "rules" / "lanewatch-rules.yml")
    result = run(require_binary("promtool"), "check", "config", str(tmp_path / "prometheus.yml"))
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "SUCCESS: 1 rule files found" in out
    assert "is valid prometheus config file syntax" in out


def test_alertmanager_config_passes_amtool() -> None:
    result = run(require_binary("amtool"), "check-config", str(ALERTMANAGER))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_commented_pager_example_is_valid_too(tmp_path: Path) -> None:
    lines = ALERTMANAGER.read_text().splitlines()
    start = lines.index("    # pagerduty_configs:")
    for i in range(start, start + 4):
        lines[i] = lines[i].replace("# ", "", 1)
    config = tmp_path / "alertmanager.yml"
    config.write_text("\n".join(lines) + "\n")
    result = run(require_binary("amtool"), "check-config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("labels", "receivers"),
    [
        (
            ["alertname=LanewatchTTFTBurnRate", "severity=page", "lane=slow", "slo=ttft"],
            "lanewatch-degrade,oncall-pager",
        ),
        (["alertname=LanewatchTTFTBurnRate", "severity=ticket", "lane=slow", "slo=ttft"], "tickets"),
        (["alertname=LanewatchLaneConvergence", "severity=ticket", "lane=fast"], "lanewatch-degrade,tickets"),
        (["alertname=LanewatchComponentDown", "severity=ticket", "job=vllm-fast"], "tickets"),
        # Mitigation alerts reach the controller and no person, whatever else they carry.
        (
            ["alertname=LanewatchTTFTMitigation", "severity=mitigate", "action=degrade", "lane=slow"],
            "lanewatch-degrade",
        ),
        (
            ["alertname=LanewatchAvailabilityMitigation", "severity=page", "action=degrade", "lane=fast"],
            "lanewatch-degrade",
        ),
    ],
)
def test_alerts_route_to_the_controller_and_to_people(labels: list[str], receivers: str) -> None:
    result = run(
        require_binary("amtool"),
        "config",
        "routes",
        "test",
        f"--config.file={ALERTMANAGER}",
        f"--verify.receivers={receivers}",
        *labels,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receivers
