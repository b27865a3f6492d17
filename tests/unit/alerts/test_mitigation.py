"""Mitigation alerts: generated per SLO from the window set, separate from paging, validated."""

from __future__ import annotations

import pytest

from lanewatch.alerts import mitigation, rules
from lanewatch.alerts.spec import DEFAULT_SPEC, DEMO_SPEC, SpecError, load_spec, parse_spec
from lanewatch.exporters import names

SPEC = """
apiVersion: lanewatch/v1
kind: SLOSpec
metadata: {name: t}
spec:
  windows:
    page:
      pairs: [{long: 1h, short: 5m, factor: 14.4}]
    mitigate: MITIGATE
  slos:
    - {name: ttft, lanes: [slow], objective: 99, latency: {metric: ttft, threshold: 2.0}}
"""


def _spec(mitigate: str) -> str:
    return SPEC.replace("MITIGATE", mitigate)


def test_the_default_spec_has_one_mitigation_alert_per_slo_in_a_fast_group_of_its_own() -> None:
    spec = load_spec(DEFAULT_SPEC)
    groups = {g.name: g for g in rules.generate(spec)}
    group = groups[mitigation.GROUP]
    assert group.interval_s == 5
    assert {(r.alert, dict(r.labels)[names.LANE]) for r in group.rules} == {
        (mitigation.alert_name(slo), slo.lane) for slo in spec.slos
    }
    for rule in group.rules:
        labels = dict(rule.labels)
        assert labels[names.ACTION] == names.ACTION_DEGRADE and labels[names.SEVERITY] == "mitigate"
        assert "[1m]" in rule.expr and rule.expr.endswith(") > 0.5") and rule.for_s == 0
    # paging stays multi-window multi-burn-rate, and no other group holds a mitigation alert
    paging = [r for g in groups.values() if g.name != mitigation.GROUP for r in g.rules if r.alert]
    assert not [r for r in paging if dict(r.labels).get(names.ACTION)]
    burn = [r for r in paging if r.alert == "LanewatchTTFTBurnRate" and dict(r.labels)["severity"] == "page"]
    assert len(burn) == 2 and all("ratio_rate1h" in r.expr and "ratio_rate5m" in r.expr for r in burn)


def test_the_demo_spec_has_no_mitigation_alerts() -> None:
    assert mitigation.GROUP not in {g.name for g in rules.generate(load_spec(DEMO_SPEC))}


def test_a_spec_declares_its_own_mitigation_window() -> None:
    spec = parse_spec(_spec("{window: 30s, errorRatio: 0.8, for: 10s, interval: 10s}"), "t.yaml")
    assert spec.mitigation is not None
    (group,) = [g for g in rules.generate(spec) if g.name == mitigation.GROUP]
    (rule,) = group.rules
    assert group.interval_s == 10 and rule.for_s == 10
    assert "[30s]" in rule.expr and rule.expr.endswith(") > 0.8")
    annotations = dict(rule.annotations)
    assert "missed TTFT ≤ 2s over the last 30s" in annotations["description"]
    assert annotations["runbook_url"].endswith("docs/runbooks.md#lanewatchttftmitigation")


@pytest.mark.parametrize(
    ("mitigate", "message"),
    [
        ("{window: 10s, errorRatio: 0.5, interval: 5s}", None),
        ("{window: 5s, errorRatio: 0.5, interval: 5s}", "must span at least two intervals"),
        ("{window: 1m, errorRatio: 1.5}", "less than 1"),
        ("{window: 1m}", "errorRatio"),
        ("{window: 1m, errorRatio: 0.005}", "not above the error budget 0.01"),
    ],
)
def test_bad_mitigation_settings_are_refused_by_field(mitigate: str, message: str | None) -> None:
    if message is None:
        spec = parse_spec(_spec(mitigate), "t.yaml")
        assert rules.generate(spec)
        return
    with pytest.raises(SpecError) as err:
        rules.generate(parse_spec(_spec(mitigate), "t.yaml"))
    assert message in str(err.value)
