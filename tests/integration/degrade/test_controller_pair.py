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

import pytest

from tests.alertmanager_bodies import alert, body
from tests.postgres import Cluster
from tests.waiting import eventually

from .gateway_admin import start_gateway_admin
from .loopback import output
from .pair_processes import (
    AM_TOKEN,
    GW_TOKEN,
    LEASE_S,
    RETRY_S,
    SHIFT50,
    audit,
    check_router_history,
    leader_of,
    start_pair,
    status,
)

pytestmark = pytest.mark.integration


def test_the_standby_takes_over_a_killed_leader_with_nothing_lost(tmp_path: Path, fresh: Cluster) -> None:
    starts = time.time()
    firing, resolved = body(alert("firing", starts=starts)), body(alert("resolved", starts=starts))
    with start_gateway_admin(GW_TOKEN) as gw, ExitStack() as stack:
        pair = start_pair(tmp_path, fresh, gw, stack)
        leader, standby = leader_of(pair)
        assert standby.health()["leader"]["holder"] == leader.name
        assert (leader.leads_by_metrics(), standby.leads_by_metrics()) == (1.0, 0.0)
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
        pair = start_pair(tmp_path, fresh, gw, stack)
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
        pair = start_pair(tmp_path, fresh, gw, stack)
        leader, standby = leader_of(pair)
        assert leader.proc is not None
        leader.proc.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        assert leader.proc.wait(15) == 0, output(leader.proc)
        eventually(lambda: standby.role() == "leader", 15, f"{standby.name} takes the lead")
        took = time.monotonic() - stopped
        print(f"takeover after SIGTERM: {took:.2f} s")
        assert took < LEASE_S, took  # it resigned: no lease to wait out


def test_a_controller_whose_store_is_unreachable_exits_naming_it(tmp_path: Path) -> None:
    from tests.servers import closed_port

    from .loopback import free_port, lanewatch_cmd

    (tmp_path / "pw").write_text("s3cret-pw-77\n")
    (tmp_path / "am.token").write_text(AM_TOKEN + "\n")
    store = {
        "url": f"postgresql://lanewatch@127.0.0.1:{closed_port()}/db",
        "password_file": str(tmp_path / "pw"),
    }
    (tmp_path / "c.yaml").write_text(json.dumps({"degrade": {"shared_store": store}}))
    cmd = lanewatch_cmd(
        "degrade", "serve", "-c", str(tmp_path / "c.yaml"), "--port", str(free_port()),
        "--token-file", str(tmp_path / "am.token"), "--adapter", "dry-run",
    )  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert "cannot reach the shared store" in done.stderr and "127.0.0.1" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "s3cret-pw-77" not in done.stderr + done.stdout


def test_the_pair_rides_out_a_database_restart(tmp_path: Path, fresh: Cluster) -> None:
    starts = time.time()
    with start_gateway_admin(GW_TOKEN) as gw, ExitStack() as stack:
        pair = start_pair(tmp_path, fresh, gw, stack)
        leader, standby = leader_of(pair)
        assert leader.notify(body(alert("firing", starts=starts))).status_code == 200
        gw.wait_for(lambda g: g.lanes == SHIFT50, 10, "slow shifted 50% to fast")
        assert leader.proc is not None
        fresh.stop()
        try:
            # the leader cannot renew: it stops leading, and exits for its supervisor to restart it
            assert leader.proc.wait(15) == 1, output(leader.proc)
            assert "lost the lead" in leader.log()
            assert standby.role() == "standby"  # nobody leads while the database is down
        finally:
            fresh.start()
        eventually(lambda: standby.role() == "leader", 15, f"{standby.name} leads once the database is back")
        leader.start(stack)
        assert leader.role() == "standby"
        assert standby.notify(body(alert("resolved", starts=starts))).status_code == 200
        gw.wait_for(lambda g: g.lanes == {}, 10, "the slow lane restored by the new leader")
        check_router_history(gw)
