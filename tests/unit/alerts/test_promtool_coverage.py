"""Every generated alert has a promtool test that fires it and a near miss that doesn't."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lanewatch.alerts.build import GENERATED_DIR

TESTS_DIR = GENERATED_DIR.parent / "tests"
RuleKey = tuple[str, frozenset[tuple[str, str]]]


def _alert_rules(rule_file: Path) -> list[RuleKey]:
    data = yaml.safe_load(rule_file.read_text())
    return [
        (r["alert"], frozenset(r.get("labels", {}).items()))
        for g in data["groups"]
        for r in g["rules"]
        if "alert" in r
    ]


def _test_groups(rule_file: Path) -> list[dict[str, Any]]:
    groups = []
    for path in sorted(TESTS_DIR.glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        if any((path.parent / f).resolve() == rule_file.resolve() for f in doc["rule_files"]):
            groups.extend(doc["tests"])
    return groups


def _matches(key: RuleKey, alertname: str, labels: dict[str, str]) -> bool:
    name, static = key
    return alertname == name and static <= set(labels.items())


def _fired(key: RuleKey, groups: list[dict[str, Any]]) -> bool:
    return any(
        _matches(key, t["alertname"], e.get("exp_labels", {}))
        for g in groups
        for t in g.get("alert_rule_test", [])
        for e in t["exp_alerts"]
    )


def _near_missed(key: RuleKey, groups: list[dict[str, Any]]) -> bool:
    """Some test of this alert, over series of the rule's lane (if it has one), expects it silent."""
    lane = dict(key[1]).get("lane")
    for g in groups:
        series = [s["series"] for s in g["input_series"]]
        if lane is not None and not any(f'lane="{lane}"' in s for s in series):
            continue
        for t in g.get("alert_rule_test", []):
            if t["alertname"] == key[0] and not any(
                _matches(key, t["alertname"], e["exp_labels"]) for e in t["exp_alerts"]
            ):
                return True
    return False


# The real-engine demo's rules come from the same generator as the simulator demo's, with other
# thresholds and windows: every alert of theirs is covered there (and checked to be the same set
# below); their own promtool test pins the story on real engines, that the burst pages and resolves.
VLLM_DEMO_RULES = GENERATED_DIR / "lanewatch-demo-vllm-rules.yml"
FULLY_TESTED = [p for p in sorted(GENERATED_DIR.glob("*.yml")) if p != VLLM_DEMO_RULES]


@pytest.mark.parametrize("rule_file", FULLY_TESTED, ids=lambda p: p.name)
def test_every_alert_fires_in_a_test_and_has_a_near_miss(rule_file: Path) -> None:
    groups = _test_groups(rule_file)
    assert groups, f"no promtool tests load {rule_file.name}"
    keys = _alert_rules(rule_file)
    assert keys
    not_fired = [k for k in keys if not _fired(k, groups)]
    not_missed = [k for k in keys if not _near_missed(k, groups)]
    assert not not_fired, f"alerts no test fires: {not_fired}"
    assert not not_missed, f"alerts without a near-miss test: {not_missed}"


def test_the_real_engine_demo_rules_alert_as_the_demo_rules_do_and_its_burst_pages() -> None:
    assert set(_alert_rules(VLLM_DEMO_RULES)) == set(_alert_rules(GENERATED_DIR / "lanewatch-demo-rules.yml"))
    groups = _test_groups(VLLM_DEMO_RULES)
    slow_page: RuleKey = (
        "LanewatchTTFTBurnRate",
        frozenset({"lane": "slow", "severity": "page", "slo": "ttft"}.items()),
    )
    assert _fired(slow_page, groups) and _near_missed(slow_page, groups)


def test_every_test_group_sets_its_interval() -> None:
    for path in sorted(TESTS_DIR.glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        assert doc.get("evaluation_interval"), path.name
        for group in doc["tests"]:
            assert group.get("interval"), f"{path.name}: {group.get('name')}"
