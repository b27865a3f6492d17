"""The generated no-leader page in a real Prometheus over a real controller pair on PostgreSQL.

Prometheus 2.42 scrapes both `lanewatch degrade serve` processes every second and evaluates the
default spec's rules, with `alerts.controllerNoLeader` cut from 30 s to 12 s to keep the test
brief (still longer than the pair's takeover: a 3 s lease, tries every 0.5 s). The leader killed
with SIGKILL: the standby leads and the page never fires. Both killed: it fires. One started
again: it leads, and the page resolves.
"""

from __future__ import annotations

import signal
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.postgres import Cluster
from tests.prometheus import alert_state, job, query_value, rules_with_waits, start_prometheus
from tests.waiting import eventually

from .gateway_admin import start_gateway_admin
from .pair_processes import GW_TOKEN, Controller, leader_of, start_pair

pytestmark = pytest.mark.integration

# The page's wait: past the pair's takeover as test_controller_pair bounds it (the 3 s lease, three
# tries 0.5 s apart, 2 s of slack) and a scrape and an evaluation a second apart each.
FOR_S = 12
ALERT = "LanewatchDegradeNoLeader"
LEADERS = "max(lanewatch_degrade_leader)"


def kill(c: Controller) -> None:
    assert c.proc is not None
    c.proc.send_signal(signal.SIGKILL)
    c.proc.wait(10)


def test_the_no_leader_page_fires_only_when_both_are_down_and_resolves_when_one_leads(
    tmp_path: Path, fresh: Cluster
) -> None:
    rules = rules_with_waits(tmp_path, {"controllerNoLeader": FOR_S})
    with start_gateway_admin(GW_TOKEN) as gw, ExitStack() as stack:
        pair = start_pair(tmp_path, fresh, gw, stack)
        leader, standby = leader_of(pair)
        targets = [f"127.0.0.1:{c.port}" for c in pair]
        base = stack.enter_context(start_prometheus(tmp_path, [job("lanewatch-degrade", targets)], [rules]))
        eventually(lambda: query_value(base, LEADERS) == 1.0, 30, "Prometheus sees one leader")

        # The leader dies: the standby leads within the lease, the page waits longer and never fires
        kill(leader)
        killed = time.monotonic()
        states: list[str | None] = []

        def led_again() -> bool:
            states.append(alert_state(base, ALERT))
            return standby.role() == "leader" and query_value(base, LEADERS) == 1.0

        eventually(led_again, 20, f"{standby.name} leads and Prometheus sees it", every_s=0.25)
        while time.monotonic() - killed < FOR_S + 4:  # past the page's wait from the kill
            states.append(alert_state(base, ALERT))
            time.sleep(0.5)
        assert "firing" not in states, states
        print(f"one killed: the page's states {sorted(set(map(str, states)))}")

        # Both down: nobody leads, and the page fires once it has waited FOR_S
        kill(standby)
        both = time.monotonic()
        eventually(
            lambda: alert_state(base, ALERT) == "firing", FOR_S + 20, "the no-leader page fires", every_s=0.25
        )
        fired = time.monotonic() - both
        assert fired >= FOR_S, fired

        # One back: it takes the expired lease and leads, and the page resolves
        leader.start(stack)
        back = time.monotonic()
        eventually(lambda: leader.role() == "leader", 20, f"{leader.name} leads again")
        eventually(lambda: alert_state(base, ALERT) is None, 20, "the no-leader page resolves", every_s=0.25)
        resolved = time.monotonic() - back
        print(f"both killed: the page fired after {fired:.1f} s (wait {FOR_S} s); one back: resolved after "
              f"{resolved:.1f} s")  # fmt: skip
