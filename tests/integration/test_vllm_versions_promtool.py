"""An older vLLM's page still fills every panel and rule that has an equivalent, checked by promtool.

The committed pre-0.9 page (written from vLLM's source) becomes promtool input series: gauges
hold their value, counters and histogram buckets grow by their value each minute, as a server
under steady load would. Every dashboard query and saturation rule that reads a `vllm:` family is
evaluated by the real PromQL engine; one returns data exactly when its families are on the page
under some name, and the families that leave a query empty are the ones the scraper reports missing.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.alerts.build import GENERATED_DIR as RULES_DIR
from lanewatch.collector.collect.scrape import missing_families, snapshot_from_text
from lanewatch.exporters import names
from tests.conftest import require_binary
from tests.integration.test_dashboards_promtool import dashboard_exprs

pytestmark = pytest.mark.integration  # runs the real promtool binary

OLD_PAGE = Path(__file__).parents[1] / "fixtures" / "vllm-0.8-from-source" / "metrics.txt"
STEPS = 30  # minutes of input series; queries are evaluated at the end
SCRAPE_LABELS = {"lane": "slow", "instance": "vllm-old:8000"}  # what the Prometheus scrape config adds
VLLM_NAME = re.compile(r"vllm:[a-z0-9_]+")


def input_series(page: str) -> list[dict[str, str]]:
    """The page's vLLM samples as promtool series: gauges flat, counters and buckets growing."""
    out = []
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if not sample.name.startswith("vllm:") or sample.name.endswith("_created"):
                continue
            labels = {**sample.labels, **SCRAPE_LABELS}
            inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            v = float(sample.value)
            values = f"{v}x{STEPS}" if family.type == "gauge" else f"{v}+{v}x{STEPS}"
            out.append({"series": f"{sample.name}{{{inner}}}", "values": values})
    return out


def current_families(expr: str) -> set[str]:
    """The vLLM families an expression reads, by current name (older spellings mapped)."""
    found = set()
    for name in VLLM_NAME.findall(expr):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        found.add(names.VLLM_LEGACY_ALIASES.get(base, base))
    return found


def vllm_queries() -> list[tuple[str, str]]:
    """(where, expr) for every dashboard query and saturation rule reading vLLM (threshold dropped)."""
    queries = [(w, e) for w, e in dashboard_exprs() if "vllm:" in e]
    for path in sorted(RULES_DIR.glob("lanewatch-rules.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule and "vllm:" in rule["expr"]:
                    # The page is calm: drop the threshold so the test asks "is there data at all".
                    queries.append((f"rule {rule['alert']}", re.sub(r"\s*>\s*[0-9.]+\s*$", "", rule["expr"])))
    return queries


def has_data_test(expr: str, expected: bool) -> dict[str, Any]:
    return {
        "expr": f"(count({expr}) or vector(0)) > bool 0",
        "eval_time": f"{STEPS}m",
        "exp_samples": [{"labels": "{}", "value": int(expected)}],
    }


def run_promtool(
    tmp_path: Path, page: str, cases: list[tuple[str, bool]]
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "empty.yml").write_text(yaml.safe_dump({"groups": []}))
    test = {
        "rule_files": ["empty.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": input_series(page),
                "promql_expr_test": [has_data_test(e, want) for e, want in cases],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    return subprocess.run(
        [require_binary("promtool"), "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_older_page_fills_every_panel_and_rule_with_an_equivalent(tmp_path: Path) -> None:
    page = OLD_PAGE.read_text()
    snap = snapshot_from_text("old", "slow", page, 1.0, 0.01)
    queries = vllm_queries()
    expected = {where: current_families(expr) <= snap.families for where, expr in queries}
    # The renamed families are what this checks: their panels and rule must fill from the old names.
    assert expected["lanewatch-server/KV-cache usage"]
    assert expected["lanewatch-server/Prefix-cache hit rate"]
    assert expected["rule LanewatchVLLMKVCacheFull"]
    empty = {where for where, ok in expected.items() if not ok}
    assert empty == {"lanewatch-server/Speculative decoding acceptance"}
    result = run_promtool(tmp_path, page, [(expr, expected[where]) for where, expr in queries])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    # What leaves a query empty is either reported missing by the scraper or an optional feature.
    unread = set().union(*(current_families(e) for w, e in queries if w in empty)) - snap.families
    assert unread <= set(missing_families(snap.families)) | names.VLLM_OPTIONAL_FAMILIES


def test_without_the_older_names_the_renamed_panels_would_be_empty(tmp_path: Path) -> None:
    """The check can fail: querying the current name alone finds nothing on the older page."""
    page = OLD_PAGE.read_text()
    current_only = f"max by (lane, instance) ({names.VLLM_KV_CACHE_USAGE_PERC})"
    either = f"max by (lane, instance) ({names.VLLM_KV_CACHE_USAGE_PERC} or vllm:gpu_cache_usage_perc)"
    ok = run_promtool(tmp_path, page, [(current_only, False), (either, True)])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = run_promtool(tmp_path, page, [(current_only, True)])
    assert wrong.returncode != 0


def test_both_names_side_by_side_are_not_counted_twice(tmp_path: Path) -> None:
    """vLLM 0.9 and 0.10 expose a renamed counter under both names: `or` keeps one of them."""
    old = OLD_PAGE.read_text()
    hits = next(
        float(line.rsplit(" ", 1)[1])
        for line in old.splitlines()
        if line.startswith("vllm:gpu_prefix_cache_hits_total{")
    )
    both = old + f'{names.VLLM_PREFIX_CACHE_HITS_TOTAL}{{engine="0",model_name="tiny"}} {hits}\n'
    new, old_name = names.VLLM_PREFIX_CACHE_HITS_TOTAL, "vllm:gpu_prefix_cache_hits_total"
    either = f"sum by (lane, instance) (rate({new}[5m]) or rate({old_name}[5m]))"
    plain_sum = f"sum by (lane, instance) (rate({new}[5m])) + sum by (lane, instance) (rate({old_name}[5m]))"
    per_second = hits / 60  # the input series grow by the page's value each minute
    exact = [
        f"abs({either} - {per_second}) < bool 1e-9",  # one of the two
        f"abs({plain_sum} - {2 * per_second}) < bool 1e-9",  # the check can fail: both, summed
    ]
    ok = run_promtool(tmp_path, both, [(f"({e}) == 1", True) for e in exact])
    assert ok.returncode == 0, ok.stdout + ok.stderr
