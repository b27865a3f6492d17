"""`lanewatch degrade serve` as a process: start-up refusals, SIGKILL and restart mid-degrade."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from tests.alertmanager_bodies import alert, body

from .gateway_admin import GatewayAdmin, start_gateway_admin
from .loopback import free_port, lanewatch_cmd, output, running, wait_http

pytestmark = pytest.mark.integration

AM_TOKEN = "am-token-c0ffee"
GW_TOKEN = "gw-token-beef01"
SHIFT50 = {"slow": {"shift_to": "fast", "shift_percent": 50, "cap_max_tokens": None, "shed_classes": []}}


def secrets(tmp_path: Path) -> tuple[Path, Path]:
    am, gw = tmp_path / "am.token", tmp_path / "gw.token"
    am.write_text(AM_TOKEN + "\n")
    gw.write_text(GW_TOKEN + "\n")
    return am, gw


def serve_cmd(tmp_path: Path, port: int, gw: GatewayAdmin, *extra: str) -> list[str]:
    am_token, gw_token = secrets(tmp_path)
    return lanewatch_cmd(
        "degrade", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--token-file", str(am_token), "--gateway", gw.url, "--gateway-token-file", str(gw_token),
        "--state-dir", str(tmp_path / "state"), "--tick-s", "0.05", *extra,
    )  # fmt: skip


def notify(port: int, data: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(
        f"http://127.0.0.1:{port}/alertmanager",
        json=data,
        headers={"Authorization": f"Bearer {AM_TOKEN}"},
        timeout=5,
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def status(tmp_path: Path) -> dict[str, Any]:
    done = CliRunner().invoke(app, ["degrade", "status", "--state-dir", str(tmp_path / "state"), "--json"])
    assert done.exit_code == 0, done.output
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_sigkill_mid_degrade_then_restart_keeps_and_reapplies(tmp_path: Path) -> None:
    starts = time.time()
    firing = body(alert("firing", starts=starts))
    hysteresis = ("--min-hold-s", "0.5", "--recovery-stable-s", "0.3", "--escalation-cooldown-s", "600")
    with start_gateway_admin(GW_TOKEN) as gw:
        port = free_port()
        with running(serve_cmd(tmp_path, port, gw, *hysteresis), tmp_path / "first.log") as first:
            wait_http(f"http://127.0.0.1:{port}/healthz", first)
            assert notify(port, firing)["outcomes"] == {"fired": 1}
            gw.wait_for(lambda g: g.lanes == SHIFT50, 10, "slow shifted 50% to fast")
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        gw.forget()  # the gateway restarted meanwhile and lost its degrade state
        assert status(tmp_path)["lanes"] == SHIFT50  # the state on disk survived the kill
        puts_before = len(gw.puts)

        port = free_port()
        with running(serve_cmd(tmp_path, port, gw, *hysteresis), tmp_path / "second.log") as second:
            wait_http(f"http://127.0.0.1:{port}/healthz", second)
            gw.wait_for(
                lambda g: g.lanes == SHIFT50 and len(g.puts) > puts_before, 10, "the degrade re-applied"
            )
            assert notify(port, firing)["outcomes"] == {"duplicate": 1}  # Alertmanager's retry after restart
            assert notify(port, body(alert("resolved", starts=starts)))["outcomes"] == {"resolved": 1}
            gw.wait_for(lambda g: g.lanes == {}, 10, "the slow lane restored")
            second.send_signal(signal.SIGTERM)
            assert second.wait(10) == 0, output(second)
    events = [e["event"] for e in status(tmp_path)["audit"]]
    assert events == ["fired", "apply", "resumed", "resolved", "restore"]
    logs = (tmp_path / "first.log").read_text() + (tmp_path / "second.log").read_text()
    assert AM_TOKEN not in logs and GW_TOKEN not in logs


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        # names the gateway refuses (an upper-case class, ':' in a lane) are refused at load
        ("lane_order: [fast, slow]\nprotect_steps:\n  - shed_classes: [Batch]\n", "shed_classes.0 (line 3)"),
        ("lane_order: [fast, 'a:b']\n", "lane_order.1 (line 1)"),
    ],
)
def test_serve_refuses_a_policy_the_gateway_would_refuse(tmp_path: Path, policy: str, field: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    cmd = lanewatch_cmd(
        "degrade", "serve", "--insecure-dev", "--adapter", "dry-run", "--port", str(free_port()),
        "--policy", str(path), "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert field in done.stderr and str(path) in done.stderr, done.stderr
    assert time.monotonic() - started < 30  # refused at load: nothing was started
    assert not (tmp_path / "state").exists()


def test_serve_refuses_a_router_config_its_adapter_would_refuse_in_an_incident(tmp_path: Path) -> None:
    """An Envoy class rule that no path of the fast lane can match: today's adapter refuses the
    fast lane's shed only when it renders it; the controller renders it at start and refuses."""
    from tests.unit.collector.degrade.test_preflight import DISJOINT, disjoint_template, envoy_config

    config = envoy_config(tmp_path, disjoint_template(tmp_path))
    cmd = lanewatch_cmd(
        "degrade", "serve", "-c", str(config), "--insecure-dev", "--port", str(free_port()),
        "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "would refuse lane fast protected (cap_max_tokens 256; shed batch)" in done.stderr, done.stderr
    assert DISJOINT in done.stderr and "match no path together" in done.stderr, done.stderr
    assert time.monotonic() - started < 30  # refused at load: nothing was started
    assert not (tmp_path / "state").exists() and not (tmp_path / "routes" / "r.yaml").exists()
