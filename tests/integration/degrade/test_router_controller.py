"""`lanewatch degrade serve --adapter envoy|nginx` as a process, driving the real router.

An Alertmanager notification goes in; the share of the slow lane's requests at the fast
upstream comes out, measured at the upstreams. A SIGKILL of the controller at a random
moment of an apply leaves the router's file whole: one of the two states, never a part.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.degrade.adapters import EnvoySettings
from lanewatch.collector.degrade.adapters.envoy_render import parse_template, render, render_text
from lanewatch.collector.degrade.adapters.nginx import render_include
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.alertmanager_bodies import alert, body
from tests.servers import free_port, lanewatch_command, started, wait_http
from tests.waiting import eventually_async

from .routers import Router
from .traffic import KINDS, moved_within, router_setup, share_at_fast, share_from

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
AM_TOKEN = "am-token-r0uter"


def _controller(tmp_path: Path, router: Router, port: int) -> list[str]:
    entry = router.settings.model_dump(mode="json", exclude_none=True)
    (tmp_path / "lanewatch.yaml").write_text(yaml.safe_dump({"degrade": {"adapters": [entry]}}))
    (tmp_path / "policy.yaml").write_text("version: 1\nlane_order: [fast, slow]\nshift_percents: [100]\n")
    (tmp_path / "am.token").write_text(AM_TOKEN + "\n")
    return [
        *lanewatch_command(), "degrade", "serve", "-c", str(tmp_path / "lanewatch.yaml"),
        "--policy", str(tmp_path / "policy.yaml"), "--host", "127.0.0.1", "--port", str(port),
        "--token-file", str(tmp_path / "am.token"), "--state-dir", str(tmp_path / "state"),
        "--tick-s", "0.05", "--min-hold-s", "0.5", "--recovery-stable-s", "0.3",
    ]  # fmt: skip


async def _notify(port: int, data: dict[str, Any]) -> None:
    async with httpx.AsyncClient(timeout=10) as c:
        r = await c.post(
            f"http://127.0.0.1:{port}/alertmanager",
            json=data,
            headers={"Authorization": f"Bearer {AM_TOKEN}"},
        )
    assert r.status_code == 200, r.text


def _router_file(router: Router) -> Path:
    s = router.settings
    return s.route_file if isinstance(s, EnvoySettings) else s.include_file


def _valid_files(router: Router) -> list[str]:
    """The router file of each state the controller can be applying: no degrade, or slow shifted."""
    states: list[dict[str, LaneDegrade]] = [{}, {"slow": LaneDegrade(shift_to="fast", shift_percent=100)}]
    s = router.settings
    if isinstance(s, EnvoySettings):
        template = parse_template(s.route_template.read_text())
        return [render_text(render(template, lanes)) for lanes in states]
    return [render_include(lanes, list(s.lanes), s.retry_after_s) for lanes in states]


@pytest.mark.parametrize("kind", KINDS)
async def test_an_alert_shifts_the_slow_lane_within_2_s_and_its_resolution_restores(
    kind: str, tmp_path: Path
) -> None:
    async with router_setup(kind, tmp_path) as (ups, router, _adapter, s):
        port = free_port()
        log = tmp_path / "controller.log"
        with started(_controller(tmp_path, router, port), log) as proc:
            wait_http(f"http://127.0.0.1:{port}/healthz", proc, lambda: log.read_text(errors="replace"))
            starts = time.time()
            t0 = time.monotonic()
            await _notify(port, body(alert("firing", starts=starts)))
            took = await moved_within(s, router, ups, t0, 1.0)
            assert await share_from(s, router, ups, t0 + 2.0) >= 0.95
            await _notify(port, body(alert("resolved", starts=starts)))
            # the policy holds 0.5 s, then waits 0.3 s of quiet before it restores
            t1 = time.monotonic()
            undegraded = _valid_files(router)[0]
            await eventually_async(
                lambda: _router_file(router).read_text() == undegraded,
                10,
                "the router file back to no degrade",
            )
            # nginx's old and new workers both take connections for a moment after a reload: the
            # promise is the share 2 s on, as for the shift
            back = time.monotonic()
            await moved_within(s, router, ups, back, 0.0)
            assert await share_from(s, router, ups, back + 2.0) <= 0.05
            print(f"{kind}: alert to shift {took:.2f} s; resolved to restored {time.monotonic() - t1:.2f} s")
        report = json.loads(_status(tmp_path))["adapters"][kind]
        assert report["applied_revision"] >= 2 and report["lanes"] == {} and "error" not in report


def _restored(tmp_path: Path) -> bool:
    report = json.loads(_status(tmp_path))["adapters"]
    return any(r.get("applied_revision", 0) >= 2 and r.get("lanes") == {} for r in report.values())


def _status(tmp_path: Path) -> str:
    done = CliRunner().invoke(app, ["degrade", "status", "--state-dir", str(tmp_path / "state"), "--json"])
    assert done.exit_code == 0, done.output
    return done.stdout


@pytest.mark.parametrize("kind", KINDS)
async def test_kill_9_of_the_controller_mid_apply_leaves_a_whole_router_file(
    kind: str, tmp_path: Path
) -> None:
    rng = random.Random(21)
    async with router_setup(kind, tmp_path) as (ups, router, _adapter, s):
        valid = _valid_files(router)
        starts = time.time()
        for attempt in range(2):
            port = free_port()
            log = tmp_path / f"controller-{attempt}.log"
            with started(_controller(tmp_path, router, port), log) as proc:
                wait_http(f"http://127.0.0.1:{port}/healthz", proc, log.read_text)
                status = "firing" if attempt % 2 == 0 else "resolved"
                await _notify(port, body(alert(status, starts=starts)))
                await asyncio.sleep(
                    rng.uniform(0.0, 0.4)
                )  # a random moment of the apply to kill at, not a wait
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
            text = _router_file(router).read_text()
            assert text in valid, f"attempt {attempt}: the router file is not a whole render:\n{text[:400]}"
            await share_at_fast(s, router, ups, 4)  # and the router serves on: every request answered 200
