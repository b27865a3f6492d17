"""A real Alertmanager 0.25 notifies the controller, which drives the gateway admin API and back."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from lanewatch.exporters import names
from tests.conftest import require_binary

from .gateway_admin import start_gateway_admin
from .loopback import free_port, lanewatch_cmd, output, running, wait_http

pytestmark = pytest.mark.integration

AM_TOKEN = "am-token-4d4d4d"
GW_TOKEN = "gw-token-5e5e5e"
LABELS = {"alertname": "LanewatchTTFTBurnRate", "lane": "slow", "severity": "page", "slo": "ttft"}


def lane(percent: int) -> dict[str, Any]:
    return {
        "slow": {"shift_to": "fast", "shift_percent": percent, "cap_max_tokens": None, "shed_classes": []}
    }


def alertmanager_config(tmp_path: Path, *controller_ports: int, token: str = AM_TOKEN) -> Path:
    """A receiver with one webhook per controller (each notified), all sending `token`."""
    credentials = tmp_path / "am-credentials"
    credentials.write_text(token)
    auth = {"authorization": {"type": "Bearer", "credentials_file": str(credentials)}}
    config = {
        "route": {
            "receiver": "lanewatch-degrade",
            "group_by": ["alertname", "lane"],
            "group_wait": "500ms",
            "group_interval": "1s",
            "repeat_interval": "1h",
        },
        "receivers": [
            {
                "name": "lanewatch-degrade",
                "webhook_configs": [
                    {
                        "url": f"http://127.0.0.1:{port}/alertmanager",
                        "send_resolved": True,
                        "http_config": auth,
                    }
                    for port in controller_ports
                ],
            }
        ],
    }
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def post_alert(am_url: str, starts: str, ends: str | None = None) -> None:
    alert: dict[str, Any] = {
        "labels": LABELS,
        "annotations": {"summary": "slow lane burning"},
        "startsAt": starts,
    }
    if ends is not None:
        alert["endsAt"] = ends
    r = httpx.post(f"{am_url}/api/v2/alerts", json=[alert], timeout=5)
    assert r.status_code == 200, r.text


def rfc3339_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def metric(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    prefix = f"{name}{{{want}}} " if labels else f"{name} "
    values = [float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)]
    return values[0] if values else 0.0


def test_alertmanager_firing_then_resolved_degrades_and_restores_the_slow_lane(tmp_path: Path) -> None:
    binary = require_binary("prometheus-alertmanager")
    (tmp_path / "am.token").write_text(AM_TOKEN)
    (tmp_path / "gw.token").write_text(GW_TOKEN)
    controller_port, am_port = free_port(), free_port()
    am_url = f"http://127.0.0.1:{am_port}"
    am_cmd = [
        binary, f"--config.file={alertmanager_config(tmp_path, controller_port)}",
        f"--storage.path={tmp_path / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
        "--cluster.listen-address=",  # no gossip port: one instance on loopback
    ]  # fmt: skip
    serve = lanewatch_cmd(
        "degrade", "serve", "--host", "127.0.0.1", "--port", str(controller_port),
        "--token-file", str(tmp_path / "am.token"), "--gateway", "PLACEHOLDER",
        "--gateway-token-file", str(tmp_path / "gw.token"), "--state-dir", str(tmp_path / "state"),
        "--min-hold-s", "2", "--recovery-stable-s", "0.5", "--escalation-cooldown-s", "1", "--tick-s", "0.05",
    )  # fmt: skip
    with start_gateway_admin(GW_TOKEN) as gw:
        serve[serve.index("PLACEHOLDER")] = gw.url
        with (
            running(serve, tmp_path / "controller.log") as controller,
            running(am_cmd, tmp_path / "alertmanager.log") as am,
        ):
            wait_http(f"http://127.0.0.1:{controller_port}/healthz", controller)
            wait_http(f"{am_url}/-/ready", am)
            starts = rfc3339_now()
            post_alert(am_url, starts)
            gw.wait_for(lambda g: lane(50) in g.states, 15, "slow shifted 50% to fast")
            gw.wait_for(lambda g: lane(100) in g.states, 10, "the shift escalated to 100%")
            resolved_at = time.monotonic()
            post_alert(am_url, starts, ends=rfc3339_now())
            gw.wait_for(lambda g: g.lanes == {}, 15, "the slow lane restored")
            restored_at = next(t for t, lanes in reversed(gw.puts) if lanes == {})
            assert restored_at - resolved_at >= 0.5  # not before the resolved notification + stable period
            assert gw.states == [lane(50), lane(100), {}]  # each step once, in order, nothing else
            text = httpx.get(f"http://127.0.0.1:{controller_port}/metrics", timeout=5).text
            controller.send_signal(signal.SIGTERM)
            assert controller.wait(10) == 0, output(controller)
    assert metric(text, names.DEGRADE_NOTIFICATIONS_TOTAL, outcome="unauthorized") == 0
    assert metric(text, names.DEGRADE_NOTIFICATIONS_TOTAL, outcome="applied") >= 2
    for direction in ("apply", "escalate", "restore"):
        assert (
            metric(text, names.DEGRADE_TRANSITIONS_TOTAL, lane="slow", action="shift", direction=direction)
            == 1
        )
    assert metric(text, names.DEGRADE_ACTIVE, lane="slow", action="shift") == 0
    logs = (tmp_path / "controller.log").read_text()
    assert AM_TOKEN not in logs and GW_TOKEN not in logs
