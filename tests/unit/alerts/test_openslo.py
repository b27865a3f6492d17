from __future__ import annotations

import pytest

from lanewatch.alerts import rules
from lanewatch.alerts.spec import SpecError, parse_spec

OPENSLO = """\
apiVersion: openslo/v1
kind: Service
metadata: {name: chat}
spec: {description: Chat completions}
---
apiVersion: openslo/v1
kind: SLO
metadata: {name: fast-ttft}
spec:
  service: chat
  description: Fast lane first token.
  budgetingMethod: Occurrences
  timeWindow: [{duration: 28d, isRolling: true}]
  indicator:
    metadata: {name: fast-ttft}
    spec:
      thresholdMetric:
        metricSource:
          type: Prometheus
          spec: {query: 'lanewatch_ttft_seconds{lane="fast", source="tap"}'}
  objectives:
    - {displayName: fast, op: lte, value: 0.5, target: 0.99}
---
apiVersion: openslo/v1
kind: SLI
metadata: {name: slow-errors}
spec:
  ratioMetric:
    counter: true
    bad: {metricSource: {type: Prometheus, spec: {query: 'lanewatch_request_errors_total{lane="slow"}'}}}
    total: {metricSource: {type: Prometheus, spec: {query: 'lanewatch_requests_total{lane="slow"}'}}}
---
apiVersion: openslo/v1
kind: SLO
metadata: {name: slow-availability}
spec:
  service: chat
  budgetingMethod: Occurrences
  timeWindow: [{duration: 28d, isRolling: true}]
  indicatorRef: slow-errors
  objectives: [{targetPercent: 99.9}]
"""


def test_the_subset_that_maps_becomes_lanewatch_slos() -> None:
    spec = parse_spec(OPENSLO, "/somewhere/Chat SLOs.yaml")
    assert spec.name == "chat-slos"
    assert spec.period_s == 28 * 86_400
    ttft, availability = spec.slos
    assert (ttft.name, ttft.lane, ttft.metric, ttft.threshold_s, ttft.objective) == (
        "ttft",
        "fast",
        "ttft",
        0.5,
        0.99,
    )
    assert ttft.selector == (("source", "tap"),)
    assert ttft.description == "Fast lane first token."
    assert (availability.name, availability.lane, availability.objective) == ("availability", "slow", 0.999)
    assert availability.metric is None
    names = {r.alert for g in rules.generate(spec) for r in g.rules if r.alert}
    assert names == {
        "LanewatchTTFTBurnRate",
        "LanewatchAvailabilityBurnRate",
        "LanewatchTTFTMitigation",
        "LanewatchAvailabilityMitigation",
        "LanewatchSeriesOverflow",
    }


@pytest.mark.parametrize(
    ("change", "message", "line"),
    [
        (("budgetingMethod: Occurrences", "budgetingMethod: Timeslices"), "only Occurrences maps", 12),
        (("isRolling: true}]\n  indicator", "isRolling: false}]\n  indicator"), "only rolling windows", 13),
        (("op: lte", "op: gte"), "only op: lte maps", 22),
        (("lanewatch_ttft_seconds{", "vllm:time_to_first_token_seconds{"), "is not one of", 20),
        (('{lane="fast", source="tap"}', '{source="tap"}'), 'a lane="..." matcher is required', 20),
        (("indicatorRef: slow-errors", "indicatorRef: nope"), "no SLI document named 'nope'", 40),
        (("target: 0.99", "target: 99"), "must be a number between 0 and 1", 22),
    ],
)
def test_what_does_not_map_is_named_with_document_and_line(
    change: tuple[str, str], message: str, line: int
) -> None:
    old, new = change
    assert old in OPENSLO
    with pytest.raises(SpecError, match=message) as info:
        parse_spec(OPENSLO.replace(old, new, 1), "chat.yaml")
    issue = info.value.issues[0]
    assert issue.path.startswith("document ")
    assert issue.line == line


def test_an_unknown_kind_is_refused() -> None:
    text = OPENSLO + "---\napiVersion: openslo/v1\nkind: AlertPolicy\nmetadata: {name: x}\n"
    with pytest.raises(SpecError, match="kind 'AlertPolicy' does not map"):
        parse_spec(text, "chat.yaml")


def test_periods_must_agree() -> None:
    text = OPENSLO.replace("duration: 28d", "duration: 7d", 1)
    with pytest.raises(SpecError, match="SLOs disagree on the period"):
        parse_spec(text, "chat.yaml")


def test_an_off_bucket_threshold_is_refused_by_validation() -> None:
    spec = parse_spec(OPENSLO.replace("value: 0.5", "value: 0.45"), "chat.yaml")
    with pytest.raises(SpecError, match=r"0\.45s is not a bucket bound"):
        rules.generate(spec)
