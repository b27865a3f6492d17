"""The guard's postable alert: the rule's labels plus source="guard", RFC 3339 times."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from lanewatch.collector.guard.alert import GUARD_SOURCE, GuardAlert, postable

ALERT = GuardAlert(
    lane="fast",
    slo="ttft",
    threshold_s=0.5,
    labels=(("alertname", "LanewatchMitigate"), ("lane", "fast"), ("slo", "ttft"), ("severity", "page")),
    annotations=(("runbook_url", "https://example.invalid/rb"), ("summary", "the rule's")),
)
RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_labels_are_the_rules_plus_source_guard() -> None:
    body = postable(ALERT, 0.0, 1.0, 10, 7, "http://c/")
    assert body["labels"] == {
        "alertname": "LanewatchMitigate",
        "lane": "fast",
        "slo": "ttft",
        "severity": "page",
        "source": "guard",
    }
    assert GUARD_SOURCE == "guard"
    assert body["generatorURL"] == "http://c/"


def test_source_label_wins_over_a_rule_label_of_that_name() -> None:
    alert = GuardAlert("fast", "ttft", 0.5, (("lane", "fast"), ("source", "rule")), ())
    assert postable(alert, 0.0, 1.0, 1, 1, "")["labels"]["source"] == "guard"


def test_times_are_rfc3339_utc_with_z() -> None:
    starts, ends = 1_700_000_000.25, 1_700_000_015.0
    body = postable(ALERT, starts, ends, 10, 7, "")
    assert body["startsAt"] == "2023-11-14T22:13:20.250Z"
    assert body["endsAt"] == "2023-11-14T22:13:35.000Z"
    for key in ("startsAt", "endsAt"):
        assert RFC3339_Z.match(body[key])
    parsed = datetime.fromisoformat(body["startsAt"].replace("Z", "+00:00"))
    assert parsed == datetime.fromtimestamp(starts, UTC)


def test_annotations_are_kept_and_summary_description_added() -> None:
    body = postable(ALERT, 0.0, 1.0, 10, 7, "")
    annotations = body["annotations"]
    assert annotations["runbook_url"] == "https://example.invalid/rb"
    assert set(annotations) == {"runbook_url", "summary", "description"}
    assert annotations["summary"] != "the rule's"  # the guard's own, with its counts
    for key in ("summary", "description"):
        assert "7 of" in annotations[key]
        assert "10" in annotations[key]
        assert "fast" in annotations[key]
        assert "0.5s" in annotations[key]


def test_postable_does_not_change_the_alert() -> None:
    postable(ALERT, 0.0, 1.0, 10, 7, "")
    assert dict(ALERT.annotations)["summary"] == "the rule's"
    assert "source" not in dict(ALERT.labels)
