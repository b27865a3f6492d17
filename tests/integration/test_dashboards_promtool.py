"""Every PromQL expression in the generated dashboards parses, checked by the real promtool."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from lanewatch.dashboards.build import GENERATED_DIR
from tests.conftest import require_binary

pytestmark = pytest.mark.integration  # runs the real promtool binary

# What Grafana substitutes before a query reaches Prometheus.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def expand(expr: str) -> str:
    """The query as Prometheus receives it with every template variable at All (".*")."""
    for var, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(var, value)
    return re.sub(r"\$\{?(target|lane|model)\}?", ".*", expr)


def dashboard_exprs() -> list[tuple[str, str]]:
    """(dashboard/panel, expr) for every panel target of every generated dashboard."""
    out = []
    for path in sorted(GENERATED_DIR.glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel["targets"]:
                out.append((f"{path.stem}/{panel['title']}", expand(target["expr"])))
    return out


def test_expansion_leaves_no_template_variable() -> None:
    exprs = dashboard_exprs()
    assert len(exprs) > 40
    for where, expr in exprs:
        assert "$" not in expr, where


def test_every_dashboard_expression_parses(tmp_path: Path) -> None:
    exprs = dashboard_exprs()
    rules = [{"record": f"dashboard:expr:{i}", "expr": expr} for i, (_, expr) in enumerate(exprs)]
    rule_file = tmp_path / "dashboards.yml"
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    result = subprocess.run(
        [require_binary("promtool"), "check", "rules", str(rule_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout


def test_promtool_refuses_a_broken_expression(tmp_path: Path) -> None:
    """The check can fail: a dropped parenthesis is caught."""
    rule_file = tmp_path / "bad.yml"
    rule_file.write_text(
        yaml.safe_dump({"groups": [{"name": "g", "rules": [{"record": "a:b:c", "expr": "sum(rate(x[5m])"}]}]})
    )
    result = subprocess.run(
        [require_binary("promtool"), "check", "rules", str(rule_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
