"""The diagnosis's recorded signals and their panels take each threshold from its one definition."""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from lanewatch.alerts.build import GENERATED_DIR
from lanewatch.alerts.diagnosis import SIGNALS, signal_rules
from lanewatch.alerts.rulemodel import Rule
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from lanewatch.dashboards.diagnosis import SIGNALS as PANELS
from lanewatch.dashboards.diagnosis import diagnosis_panels
from lanewatch.exporters import names


def _thresholds(rules: Sequence[Rule]) -> dict[str, str]:
    return {dict(r.labels)["signal"]: r.expr for r in rules if r.record == names.DIAGNOSE_THRESHOLD}


def test_every_signal_is_named_by_a_threshold_and_has_a_panel() -> None:
    assert {name for name, _ in SIGNALS} <= set(Thresholds.model_fields)
    assert [name for name, *_ in PANELS] == [name for name, _ in SIGNALS]


def test_the_rules_record_the_thresholds_they_are_given() -> None:
    assert _thresholds(signal_rules(300))["kv_usage"] == f"vector({DEFAULT_THRESHOLDS.kv_usage:g})"
    moved = signal_rules(300, Thresholds(kv_usage=0.95, error_share=0.05))
    assert _thresholds(moved)["kv_usage"] == "vector(0.95)"
    assert _thresholds(moved)["error_share"] == "vector(0.05)"
    kv = next(
        r for r in moved if r.record == names.DIAGNOSE_SIGNAL and dict(r.labels)["signal"] == "kv_usage"
    )
    assert "[5m]" in kv.expr and "gpu_cache_usage_perc" in kv.expr  # the older name too


def test_the_generated_rules_hold_the_default_thresholds() -> None:
    doc = yaml.safe_load((GENERATED_DIR / "lanewatch-rules.yml").read_text(encoding="utf-8"))
    group = next(g for g in doc["groups"] if g["name"] == "lanewatch-diagnosis")
    recorded = {
        r["labels"]["signal"]: r["expr"]
        for r in group["rules"]
        if r.get("record") == names.DIAGNOSE_THRESHOLD
    }
    assert recorded == {name: f"vector({float(getattr(DEFAULT_THRESHOLDS, name)):g})" for name, _ in SIGNALS}


def test_each_panel_turns_red_at_the_diagnosis_threshold() -> None:
    panels = {p.title: p for p in diagnosis_panels(Thresholds(kv_usage=0.8, prefix_hit_rate=0.5))}
    kv = panels["Diagnosis: vLLM KV-cache usage"].thresholds
    assert kv == [{"color": "green", "value": None}, {"color": "red", "value": 0.8}]
    hits = panels["Diagnosis: vLLM prefix-cache hit rate"].thresholds  # red below: low reuse
    assert hits == [{"color": "red", "value": None}, {"color": "green", "value": 0.5}]
