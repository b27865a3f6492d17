"""Alertmanager 0.25 webhook bodies for tests: the captured fixtures, and ones shaped like them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt while an alert fires


def fixture(status: str) -> dict[str, Any]:
    """The captured body for `firing` or `resolved`."""
    data: dict[str, Any] = json.loads((FIXTURES / f"alertmanager-0.25-webhook-{status}.json").read_text())
    return data


def rfc3339(ts: float) -> str:
    """Unix seconds as Alertmanager writes times."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def alert(
    status: str = "firing",
    *,
    fingerprint: str = "03107dda0bae023b",
    lane: str | None = "slow",
    alertname: str = "LanewatchTTFTBurnRate",
    severity: str = "page",
    starts: float = 1_800_000_000.0,
    ends: float | None = None,
) -> dict[str, Any]:
    """One alert as Alertmanager writes it in a webhook body."""
    labels = {"alertname": alertname, "severity": severity, "slo": "ttft"}
    if lane is not None:
        labels["lane"] = lane
    return {
        "status": status,
        "labels": labels,
        "annotations": {"summary": f"{lane} lane burning"},
        "startsAt": rfc3339(starts),
        "endsAt": ZERO_TIME if status == "firing" else rfc3339(ends if ends is not None else starts + 60),
        "generatorURL": "http://127.0.0.1:9090/graph",
        "fingerprint": fingerprint,
    }


def body(*alerts: dict[str, Any]) -> dict[str, Any]:
    """A version-4 notification holding these alerts."""
    firing = any(a["status"] == "firing" for a in alerts)
    common = dict(alerts[0]["labels"]) if alerts else {}
    return {
        "receiver": "lanewatch-degrade",
        "status": "firing" if firing else "resolved",
        "alerts": list(alerts),
        "groupLabels": {k: v for k, v in common.items() if k in ("alertname", "lane")},
        "commonLabels": common,
        "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9093",
        "version": "4",
        "groupKey": '{}:{alertname="LanewatchTTFTBurnRate"}',
        "truncatedAlerts": 0,
    }


def encode(data: dict[str, Any]) -> bytes:
    """JSON bytes as posted."""
    return json.dumps(data).encode()
