"""Two `lanewatch degrade serve` processes on one PostgreSQL: one leads, the other takes over.

Real processes, a real PostgreSQL (a private cluster on 127.0.0.1) and the gateway's admin
API (409 for an older revision), with the lease cut short (3 s) to keep the test brief.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.degrade.shared_store import SharedStore, connect
from tests.alertmanager_bodies import alert, body
from tests.postgres import Cluster
from tests.waiting import eventually

from .gateway_admin import GatewayAdmin, start_gateway_admin
from .loopback import free_port, lanewatch_cmd, output, running, wait_http

pytestmark = pytest.mark.integration

AM_TOKEN = "am-token-pair-0042"
GW_TOKEN = "gw-token-pair-0043"
SHIFT50 = {"slow": {"shift_to": "fast", "shift_percent": 50, "cap_max_tokens": None, "shed_classes": []}}
LEASE_S, RENEW_DEADLINE_S, RETRY_S = 3.0, 2.0, 0.5


class Controller:
    """One controller process of the pair: its name, port and process."""

    def __init__(self, name: str, tmp: Path, pg: Cluster, gw: GatewayAdmin) -> None:
        self.name, self.port, self.tmp = name, free_port(), tmp
        (tmp / "am.token").write_text(AM_TOKEN + "\n")
        (tmp / "gw.token").write_text(GW_TOKEN + "\n")
        shared = {
            "url": pg.url, "password_file": str(pg.password_file), "name": name,
            "lease_s": LEASE_S, "renew_deadline_s": RENEW_DEADLINE_S, "retry_s": RETRY_S,
        }  # fmt: skip
        self.config = tmp / f"{name}.yaml"
        self.config.write_text(yaml.safe_dump({"degrade": {"shared_store": shared}}))
        self.gw = gw
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def cmd(self) -> list[str]:
        return lanewatch_cmd(
            "degrade", "serve", "-c", str(self.config), "--host", "127.0.0.1", "--port", str(self.port),
            "--token-file", str(self.tmp / "am.token"), "--gateway", self.gw.url,
            "--gateway-token-file", str(self.tmp / "gw.token"), "--tick-s", "0.05",
            "--min-hold-s", "0.5", "--recovery-stable-s", "0.3", "--escalation-cooldown-s", "600",
        )  # fmt: skip

    def start(self, stack: ExitStack) -> None:
        self.starts += 1
        self.proc = stack.enter_context(running(self.cmd(), self.tmp / f"{self.name}-{self.starts}.log"))
        wait_http(f"http://127.0.0.1:{self.port}/healthz", self.proc)

    def health(self) -> dict[str, Any]:
        r = httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=5)
        result: dict[str, Any] = r.json()
        return result

    def role(self) -> str | None:
        try:
            return str(self.health()["role"])
        except httpx.HTTPError:
            return None

    def notify(self, data: dict[str, Any]) -> httpx.Response:
        return httpx.post(
            f"http://127.0.0.1:{self.port}/alertmanager",
            json=data,
            headers={"Authorization": f"Bearer {AM_TOKEN}"},
            timeout=5,
        )

    def log(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.tmp.glob(f"{self.name}-*.log")))


def leader_of(pair: list[Controller]) -> tuple[Controller, Controller]:
    """(leader, standby), once exactly one leads."""
    roles: dict[str, Controller] = {}

    def one_leads() -> bool:
        roles.clear()
        for c in pair:
            roles[c.role() or "down"] = c
        return set(roles) == {"leader", "standby"}

    eventually(one_leads, 15, "one controller leads, the other stands by")
    return roles["leader"], roles["standby"]


def revisions_taken(gw: GatewayAdmin) -> list[tuple[int | None, dict[str, Any]]]:
    with gw.lock:
        return list(gw.taken)


def check_router_history(gw: GatewayAdmin) -> None:
    """The router never took a revision older than one it held, nor two states for one revision."""
    taken = revisions_taken(gw)
    revisions = [r for r, _ in taken]
    assert all(r is not None for r in revisions)
    assert revisions == sorted(revisions), revisions  # type: ignore[type-var]
    by_revision: dict[int | None, dict[str, Any]] = {}
    for r, lanes in taken:
        assert by_revision.setdefault(r, lanes) == lanes, (r, lanes, by_revision[r])


def status(pg: Cluster, *args: str) -> Any:
    """`lanewatch degrade status` on the pair's store: the JSON with --json, else the text."""
    done = CliRunner().invoke(
        app, ["degrade", "status", "--shared-store", pg.url, "--password-file", str(pg.password_file), *args]
    )
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout) if "--json" in args else done.stdout


def audit(pg: Cluster) -> list[tuple[int, int, str, str | None]]:
    reader = SharedStore(connect(pg.url, pg.password(), 5.0), "test", readonly=True)
    try:
        return reader.audit_terms()
    finally:
        reader.close()


def test_the_standby_takes_over_a_killed_leader_with_nothing_lost(tmp_path: Path, fresh: Cluster) -> None:
    starts = time.time()
    firing, resolved = body(alert("firing", starts=starts)), body(alert("resolved", starts=starts))
    with start_gateway_admin(GW_TOKEN) as gw, ExitStack() as stack:
        pair = [Controller(n, tmp_path, fresh, gw) for n in ("a", "b")]
        for c in pair:
            c.start(stack)
        leader, standby = leader_of(pair)
        assert standby.health()["leader"]["holder"] == leader.name
        # Alertmanager sends to both: the leader decides, the standby keeps its copy for a leader
        answer = leader.notify(firing)
        assert answer.status_code == 200 and answer.json()["outcomes"] == {"fired": 1}, answer.text
        assert standby.notify(firing).status_code == 202  # drained by the leader: a duplicate
        gw.wait_for(lambda g: g.lanes == SHIFT50, 10, "slow shifted 50% to fast")

        assert leader.proc is not None
        leader.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        leader.proc.wait(10)
        # the fault clears while nobody leads: the notification waits in the inbox
        answer = standby.notify(resolved)
        assert answer.status_code == 202 and answer.json()["status"] == "queued", answer.text
        eventually(lambda: standby.role() == "leader", 15, f"{standby.name} takes the lead")
        took = time.monotonic() - killed
        print(f"takeover after kill -9: {took:.2f} s")
        assert took < LEASE_S + 3 * RETRY_S + 2, took  # the lease runs out, then one try
        gw.wait_for(lambda g: g.lanes == {}, 10, "the slow lane restored by the new leader")

        leader.start(stack)  # the killed one comes back, as a standby
        assert leader.role() == "standby"
        assert leader.health()["leader"]["holder"] == standby.name
        check_router_history(gw)
        shown = status(fresh, "--json")
        assert shown["leader"]["holder"] == standby.name and shown["leader"]["live"] and shown["lanes"] == {}
    # both stopped: the last leader resigned on its way out
    assert f"leader: NONE: {standby.name}'s lease (term 2) expired" in status(fresh)

    entries = audit(fresh)
    leads = [(t, r) for r, t, e, _ in entries if e == "lead"]
    assert [t for t, _ in leads] == [1, 2], entries
    assert [e for _, _, e, _ in entries if e in ("apply", "restore")] == ["apply", "restore"], entries
    revisions = [r for r, _, _, _ in entries]
    assert revisions == sorted(revisions), entries  # the new leader went on from the last revision
    # each transition at the term of the leader that made it
    assert [(e, t) for _, t, e, _ in entries if e in ("apply", "restore")] == [("apply", 1), ("restore", 2)]
    logs = pair[0].log() + pair[1].log()
    assert AM_TOKEN not in logs and GW_TOKEN not in logs and fresh.password() not in logs


def test_a_stalled_leader_that_wakes_up_changes_nothing(tmp_path: Path, fresh: Cluster) -> None:
    starts = time.time()
    firing, resolved = body(alert("firing", starts=starts)), body(alert("resolved", starts=starts))
    with start_gateway_admin(GW_TOKEN) as gw, ExitStack() as stack:
        pair = [Controller(n, tmp_path, fresh, gw) for n in ("a", "b")]
        for c in pair:
            c.start(stack)
        leader, standby = leader_of(pair)
        assert leader.notify(firing).status_code == 200
        gw.wait_for(lambda g: g.lanes == SHIFT50, 10, "slow shifted 50% to fast")
        assert leader.proc is not None
        leader.proc.send_signal(signal.SIGSTOP)  # a leader that hangs without dying
        try:
            eventually(lambda: standby.role() == "leader", 15, f"{standby.name} takes the lead")
            assert standby.notify(resolved).status_code == 200
            gw.wait_for(lambda g: g.lanes == {}, 10, "the slow lane restored by the new leader")
        finally:
            leader.proc.send_signal(signal.SIGCONT)
        # it wakes, finds its lease gone and exits; nothing it sent was taken
        assert leader.proc.wait(15) == 1, output(leader.proc)
        assert "lost the lead" in leader.log()
        time.sleep(0.5)
        assert gw.lanes == {}
        check_router_history(gw)
    terms = {t for _, t, e, _ in audit(fresh) if e in ("apply", "restore")}
    assert terms == {1, 2}


def test_a_leader_that_stops_hands_over_at_once(tmp_path: Path, fresh: Cluster) -> None:
    with start_gateway_admin(GW_TOKEN) as gw, ExitStack() as stack:
        pair = [Controller(n, tmp_path, fresh, gw) for n in ("a", "b")]
        for c in pair:
            c.start(stack)
        leader, standby = leader_of(pair)
        assert leader.proc is not None
        leader.proc.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        assert leader.proc.wait(15) == 0, output(leader.proc)
        eventually(lambda: standby.role() == "leader", 15, f"{standby.name} takes the lead")
        took = time.monotonic() - stopped
        print(f"takeover after SIGTERM: {took:.2f} s")
        assert took < LEASE_S, took  # it resigned: no lease to wait out
