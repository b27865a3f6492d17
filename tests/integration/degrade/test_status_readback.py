"""`lanewatch degrade status --controller`: what the router holds, read back, beside the desired state.

A real gateway on 127.0.0.1, a `lanewatch degrade serve` process driving it through the gateway
adapter, and the status command as a process asking the controller's `GET /routers`. An alert
shifts the slow lane: the gateway holds it (in sync, exit 0). Someone then PUTs another state
to the gateway behind the controller's back: status says DIVERGED, with both states, and exits
3. With the gateway gone, the router is stale: exit 3 again. The store's record says nothing
of either, which is why the read-back is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from tests.alertmanager_bodies import alert, body
from tests.servers import free_port, lanewatch_command, started
from tests.waiting import eventually_async

from ..gateway_harness import RunningGateway, gateway_server, upstream_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
AM_TOKEN = "am-token-st4tus"
GW_TOKEN = "gw-token-st4tus"
SHIFTED = {"shift_to": "fast", "shift_percent": 100, "cap_max_tokens": None, "shed_classes": []}


def _controller(tmp_path: Path, gateway_url: str, port: int) -> list[str]:
    (tmp_path / "policy.yaml").write_text("version: 1\nlane_order: [fast, slow]\nshift_percents: [100]\n")
    (tmp_path / "am.token").write_text(AM_TOKEN + "\n")
    return [
        *lanewatch_command(), "degrade", "serve", "--policy", str(tmp_path / "policy.yaml"),
        "--host", "127.0.0.1", "--port", str(port), "--token-file", str(tmp_path / "am.token"),
        "--gateway", gateway_url, "--gateway-token-file", str(tmp_path / "gw.token"),
        "--state-dir", str(tmp_path / "state"), "--tick-s", "0.05",
        "--reconcile-interval-s", "600",  # the controller must not repair the gateway mid-test
    ]  # fmt: skip


async def _status(tmp_path: Path, port: int, *extra: str) -> tuple[int, str]:
    """`lanewatch degrade status --controller ...` as a process: its exit status and stdout."""
    args = ["--controller", f"http://127.0.0.1:{port}", "--token-file", str(tmp_path / "am.token"), *extra]
    proc = await asyncio.create_subprocess_exec(
        *lanewatch_command(), "degrade", "status", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


async def _get(url: str, **kw: Any) -> httpx.Response | None:
    try:
        async with httpx.AsyncClient(timeout=5) as c:
            return await c.get(url, **kw)
    except httpx.HTTPError:
        return None


async def _wait_up(port: int, log: Path) -> None:
    """Poll the controller's /healthz (without blocking the loop the gateway runs on) until 200."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = await _get(f"http://127.0.0.1:{port}/healthz")
        if r is not None and r.status_code == 200:
            return
        await asyncio.sleep(0.1)
    text = await asyncio.to_thread(log.read_text, errors="replace")
    raise AssertionError(f"the controller did not answer /healthz within 30 s\n{text}")


async def test_status_shows_the_routers_read_back_and_marks_a_divergence_and_a_stale_router(
    tmp_path: Path,
) -> None:
    (tmp_path / "gw.token").write_text(GW_TOKEN + "\n")
    port = free_port()
    log = tmp_path / "controller.log"
    async with (
        upstream_server(first_ms=1, gap_ms=1, model="small") as (_fast, fast_url),
        upstream_server(first_ms=1, gap_ms=1, model="big") as (_slow, slow_url),
    ):
        with contextlib.ExitStack() as controller:  # it outlives the gateway, for the stale check
            async with gateway_server(
                {"fast": [fast_url], "slow": [slow_url]},
                admin_token_file=str(tmp_path / "gw.token"),
                lane_order=["fast", "slow"],
            ) as g:
                controller.enter_context(started(_controller(tmp_path, g.url, port), log))
                await _wait_up(port, log)
                await _in_sync_then_diverged(tmp_path, port, g)
            code, out = await _status(tmp_path, port)  # the gateway's port is closed now
            assert code == 3, out
            assert "router gateway: STALE (cannot be read back: " in out, out
            assert "wants lane slow: shift 100% to fast" in out, out


async def _in_sync_then_diverged(tmp_path: Path, port: int, g: RunningGateway) -> None:
    async with httpx.AsyncClient(timeout=10) as c:
        r = await c.post(
            f"http://127.0.0.1:{port}/alertmanager",
            json=body(alert("firing", starts=time.time())),
            headers={"Authorization": f"Bearer {AM_TOKEN}"},
        )
    assert r.status_code == 200, r.text
    await eventually_async(lambda: "slow" in g.gw.degrade.lanes, 10, "the gateway holds the shift")
    code, out = await _status(tmp_path, port)
    assert code == 0, out
    assert "router gateway: in sync: holds lane slow: shift 100% to fast (revision " in out, out

    # Behind the controller's back: the gateway is told to hold no degrade (no revision).
    auth = {"Authorization": f"Bearer {GW_TOKEN}"}
    async with (
        aiohttp.ClientSession() as s,
        s.put(f"{g.url}/admin/degrade", json={"lanes": {}}, headers=auth) as put,
    ):
        assert put.status == 200, await put.text()
    code, out = await _status(tmp_path, port)
    assert code == 3, out
    line = next(x for x in out.splitlines() if "router gateway:" in x)
    assert line.strip() == (
        "router gateway: DIVERGED: wants lane slow: shift 100% to fast; "
        "holds no degrade (no revision, version 2)"
    ), out
    code, out = await _status(tmp_path, port, "--json")
    assert code == 3, out
    report = json.loads(out)["read_back"]
    gateway = report["routers"]["gateway"]
    assert (gateway["verdict"], gateway["held"], gateway["desired"]) == ("diverged", {}, {"slow": SHIFTED})
    assert gateway["revision"] is None and report["revision"] >= 1
    unauthorized = await _get(f"http://127.0.0.1:{port}/routers")
    assert unauthorized is not None and unauthorized.status_code == 401
