from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from lanewatch.collector.degrade.webhook import WebhookError, parse_notification
from tests.alertmanager_bodies import FIXTURES, alert, body, encode, fixture


def test_captured_alertmanager_bodies_parse() -> None:
    firing = parse_notification((FIXTURES / "alertmanager-0.25-webhook-firing.json").read_bytes())
    resolved = parse_notification((FIXTURES / "alertmanager-0.25-webhook-resolved.json").read_bytes())
    assert firing.status == "firing" and resolved.status == "resolved"
    a, r = firing.alerts[0], resolved.alerts[0]
    assert a.fingerprint == r.fingerprint == "03107dda0bae023b"
    assert a.labels["lane"] == "slow" and a.labels["alertname"] == "LanewatchTTFTBurnRate"
    assert a.starts_at == r.starts_at == datetime(2026, 11, 29, 7, 25, 50, tzinfo=UTC)
    assert a.ends_at.year == 1  # the zero time Alertmanager writes while firing
    assert r.ends_at == datetime(2026, 11, 29, 7, 25, 54, tzinfo=UTC)
    assert firing.group_labels == {"alertname": "LanewatchTTFTBurnRate", "lane": "slow"}


def _reasons(data: object) -> str:
    with pytest.raises(WebhookError) as info:
        parse_notification(json.dumps(data).encode())
    return str(info.value)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("version"), "version"),
        (lambda d: d.update(version="3"), "version"),
        (lambda d: d.update(version=4), "version"),  # strict: a number is not the string "4"
        (lambda d: d.update(truncatedAlerts="0"), "truncatedAlerts"),
        (lambda d: d.update(truncatedAlerts=-1), "truncatedAlerts"),
        (lambda d: d.update(status="pending"), "status"),
        (lambda d: d.update(alerts=[]), "alerts"),
        (lambda d: d["alerts"][0].pop("fingerprint"), "alerts.0.fingerprint"),
        (lambda d: d["alerts"][0].update(fingerprint="XYZ"), "alerts.0.fingerprint"),
        (lambda d: d["alerts"][0].update(startsAt="yesterday"), "alerts.0.startsAt"),
        (lambda d: d["alerts"][0].update(startsAt="2026-11-29T07:25:50"), "alerts.0.startsAt"),  # no zone
        (lambda d: d["alerts"][0]["labels"].update(lane=3), "alerts.0.labels.lane"),
        (lambda d: d.update(groupLabels=None), "groupLabels"),
    ],
)
def test_bad_field_is_named(mutate: object, field: str) -> None:
    data = fixture("firing")
    mutate(data)  # type: ignore[operator]
    assert field in _reasons(data)


def test_fields_from_newer_alertmanagers_are_ignored() -> None:
    data = fixture("firing")
    data["surprise"] = {"new": "field"}
    data["alerts"][0]["extra"] = True
    n = parse_notification(json.dumps(data).encode())
    assert n.alerts[0].fingerprint == fixture("firing")["alerts"][0]["fingerprint"]


def test_not_json_and_not_an_object_are_refused() -> None:
    for raw in (b"", b"{", b"[]", b"null", b"\xff\xfe"):
        with pytest.raises(WebhookError):
            parse_notification(raw)


def test_reasons_do_not_echo_input() -> None:
    data = body(alert())
    data["alerts"][0]["fingerprint"] = "SECRET-LOOKING-VALUE"
    assert "SECRET-LOOKING-VALUE" not in _reasons(data)


def test_many_errors_are_capped() -> None:
    data = body(*[alert(fingerprint="bad") for _ in range(50)])
    with pytest.raises(WebhookError) as info:
        parse_notification(encode(data))
    assert len(info.value.reasons) == 21 and info.value.reasons[-1].startswith("... and 30 more")
