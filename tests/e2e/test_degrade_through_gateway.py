"""The closed loop on real processes: Alertmanager → degrade controller → lanewatch gateway → lanes.

A firing TTFT burn-rate alert on the slow lane makes the gateway serve slow-lane requests
from the fast lane (50%, then 100%); the resolved alert restores the slow lane. The gateway
here is the real one (`lanewatch gateway` over two test upstreams), so this checks the
admin API contract (docs/gateway.md) from both ends.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.conftest import require_binary
from tests.integration.degrade.loopback import free_port, lanewatch_cmd, running, wait_http
from tests.integration.degrade.test_alertmanager_loop import (
    AM_TOKEN,
    alertmanager_config,
    post_alert,
    rfc3339_now,
)
from tests.integration.gateway_harness import chat_body, start_gateway, start_test_upstream
from tests.waiting import eventually

pytestmark = pytest.mark.e2e
GW_TOKEN = "gw-token-7f7f7f"


def _served(client: httpx.Client, n: int) -> list[str]:
    lanes = []
    for _ in range(n):
        r = client.post("/v1/chat/completions", json=chat_body(2))
        assert r.status_code == 200
        lanes.append(r.headers["x-lanewatch-lane"])
    return lanes


def test_alert_shifts_the_slow_lane_through_the_real_gateway_and_back(tmp_path: Path) -> None:
    binary = require_binary("prometheus-alertmanager")
    (tmp_path / "am.token").write_text(AM_TOKEN)
    (tmp_path / "gw.token").write_text(GW_TOKEN)
    controller_port, am_port = free_port(), free_port()
    am_url = f"http://127.0.0.1:{am_port}"
    am_cmd = [
        binary, f"--config.file={alertmanager_config(tmp_path, controller_port)}",
        f"--storage.path={tmp_path / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
        "--cluster.listen-address=",
    ]  # fmt: skip
    auth = {"Authorization": f"Bearer {GW_TOKEN}"}
    with (
        start_test_upstream(tmp_path, first_ms=1, gap_ms=1) as fast,
        start_test_upstream(tmp_path, first_ms=1, gap_ms=1) as slow,
        start_gateway(
            tmp_path, [f"fast={fast}", f"slow={slow}"], "--admin-token-file", str(tmp_path / "gw.token")
        ) as gw,
        httpx.Client(base_url=gw.url, timeout=10) as client,
    ):
        serve = lanewatch_cmd(
            "degrade", "serve", "--host", "127.0.0.1", "--port", str(controller_port),
            "--token-file", str(tmp_path / "am.token"), "--gateway", gw.url,
            "--gateway-token-file", str(tmp_path / "gw.token"), "--state-dir", str(tmp_path / "state"),
            "--min-hold-s", "2", "--recovery-stable-s", "0.5", "--escalation-cooldown-s", "1",
            "--tick-s", "0.05",
        )  # fmt: skip
        with (
            running(serve, tmp_path / "controller.log") as controller,
            running(am_cmd, tmp_path / "alertmanager.log") as am,
        ):
            wait_http(f"http://127.0.0.1:{controller_port}/healthz", controller)
            wait_http(f"{am_url}/-/ready", am)
            assert _served(client, 3) == ["slow"] * 3  # the default lane, before any alert

            def shift() -> int:
                lanes = client.get("/admin/degrade", headers=auth).json()["lanes"]
                return int(lanes.get("slow", {}).get("shift_percent", 0))

            starts = rfc3339_now()
            post_alert(am_url, starts)
            assert eventually(lambda: shift() >= 50, 15, "slow shifted to fast")
            eventually(lambda: shift() == 100, 10, "the shift escalated to 100%")
            degraded = client.post("/v1/chat/completions", json=chat_body(2))
            assert degraded.headers["x-lanewatch-lane"] == "fast"
            assert degraded.headers["x-lanewatch-degraded"] == "shift"
            assert _served(client, 4) == ["fast"] * 4
            post_alert(am_url, starts, ends=rfc3339_now())
            eventually(lambda: shift() == 0, 15, "the slow lane restored")
            assert _served(client, 3) == ["slow"] * 3
