"""`lanewatch degrade serve` killed with SIGKILL at random moments while it takes transitions.

tests/unit/collector/degrade/test_store.py kills a process that only writes the store; this
kills the whole controller (webhook, decision, commit, adapters, ticks) while Alertmanager
posts keep firing and resolving a lane and the clock escalates and restores it. After each
kill the state on disk is one side of a transition: a whole state (never a mix), whose lanes
are the ones its own last audited action says (state and audit land together), no older than
any answer the controller gave; and the restarted controller applies exactly it to the router.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from lanewatch.collector.degrade.state import desired_state, lanes_to_json
from lanewatch.collector.degrade.store import Store
from tests.alertmanager_bodies import alert, body
from tests.integration.degrade.gateway_admin import GatewayAdmin, start_gateway_admin
from tests.servers import free_port
from tests.waiting import eventually

from .processes import Service, secret_file, service

pytestmark = pytest.mark.integration

AM_TOKEN, GW_TOKEN = "am-crash-4d1e", "gw-crash-9b7c"
ROUNDS = 6
SIDES = {0, 50, 100}  # the shift percents of the slow lane a transition can land on


class Alertmanager:
    """Posts firing then resolved notifications of ever new alert instances until stopped."""

    def __init__(self, url: str, seed: int) -> None:
        self.url, self.rng = url, random.Random(seed)
        self.stop = threading.Event()
        self.acked = 0  # the highest revision the controller answered 200 with
        self.posts = 0
        self._thread = threading.Thread(target=self._run)

    def __enter__(self) -> Alertmanager:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        headers = {"authorization": f"Bearer {AM_TOKEN}"}
        with httpx.Client(timeout=2) as c:
            while not self.stop.is_set():
                starts = time.time()
                for status in ("firing", "resolved"):
                    try:
                        r = c.post(self.url, json=body(alert(status, starts=starts)), headers=headers)
                    except httpx.HTTPError:
                        return  # the controller was killed
                    if r.status_code == 200:
                        self.acked = max(self.acked, int(r.json()["revision"]))
                        self.posts += 1
                    time.sleep(self.rng.uniform(0, 0.08))


def controller(tmp_path: Path, gw: GatewayAdmin, port: int, n: int) -> Any:
    args = [
        "degrade", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--token-file", str(secret_file(tmp_path, "am.token", AM_TOKEN)),
        "--gateway", gw.url, "--gateway-token-file", str(secret_file(tmp_path, "gw.token", GW_TOKEN)),
        "--state-dir", str(tmp_path / "state"), "--tick-s", "0.02",
        "--min-hold-s", "0", "--recovery-stable-s", "0.05", "--escalation-cooldown-s", "0.1",
    ]  # fmt: skip
    return service(args, port, tmp_path / f"controller-{n}.log", "/healthz")


def shift_percent(lanes: dict[str, Any]) -> int:
    return int(lanes.get("slow", {}).get("shift_percent", 0))


def on_disk(state_dir: Path) -> tuple[int, dict[str, Any], int]:
    """(revision, router lanes of the stored state, shift percent the last audited shift action left)."""
    store = Store(state_dir, readonly=True)
    try:
        snap = store.load()
        entries = [e for _, _, e in store.recent(10_000) if e.action == "shift"]
    finally:
        store.close()
    audited = 0
    if entries:
        last = entries[-1]
        audited = 0 if last.event == "restore" else int(last.detail["percent"])
    return snap.revision, lanes_to_json(desired_state(snap.state))["lanes"], audited


def test_sigkill_at_random_moments_of_transitions_leaves_one_side_and_restarts_onto_it(
    tmp_path: Path,
) -> None:
    rng = random.Random(11)
    total_posts = 0
    with start_gateway_admin(GW_TOKEN) as gw:
        for n in range(ROUNDS):
            port = free_port()
            with controller(tmp_path, gw, port, n) as ctl:
                if n:  # the router, reset, gets the state back from the restarted controller
                    gw.wait_for(
                        lambda g: g.lanes == on_disk(tmp_path / "state")[1], 10, f"round {n} re-apply"
                    )
                with Alertmanager(f"{ctl.url}/alertmanager", seed=n) as am:
                    eventually(lambda: am.posts, 10, "a first Alertmanager post", every_s=0.01)
                    time.sleep(rng.uniform(0.0, 0.5))  # a random moment in the middle of work
                    kill(ctl)
                total_posts += am.posts
            revision, lanes, audited = on_disk(tmp_path / "state")
            percent = shift_percent(lanes)
            assert percent in SIDES, lanes
            assert percent == audited, (lanes, audited)  # the state is the side its audit names
            assert revision >= am.acked, (revision, am.acked)  # nothing answered was lost
            gw.forget()  # as a restarted router: only the controller's re-apply can restore it
    assert total_posts >= ROUNDS  # every kill came in the middle of real work


def kill(ctl: Service) -> None:
    ctl.process.send_signal(signal.SIGKILL)
    ctl.process.wait(10)
