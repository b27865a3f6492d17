"""Two real Alertmanager 0.25 replicas, peered by gossip on loopback, in front of a controller pair.

The alert goes to both replicas, as Prometheus and the guard send it; each replica notifies both
controllers. The replicas deduplicate among themselves and the controllers' decisions are
idempotent, so the lane shifts once and restores once, also when one replica is killed between
the two.
"""

from __future__ import annotations

import random
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from tests.alertmanager_cluster import peered, replica_commands
from tests.postgres import Cluster
from tests.waiting import eventually

from .gateway_admin import start_gateway_admin
from .loopback import running, wait_http
from .pair_processes import (
    AM_TOKEN,
    GW_TOKEN,
    SHIFT50,
    audit,
    check_router_history,
    leader_of,
    start_pair,
)
from .test_alertmanager_loop import alertmanager_config, post_alert, rfc3339_now

pytestmark = pytest.mark.integration


@contextmanager
def am_cluster(tmp_path: Path, config: Path) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    """Two replicas, each naming the other as its peer; (URL, process) each, once both see two members."""
    with ExitStack() as stack:
        out = []
        for i, (cmd, url) in enumerate(replica_commands(tmp_path, config)):
            proc = stack.enter_context(running(cmd, tmp_path / f"am-{i}.log"))
            wait_http(f"{url}/-/ready", proc)
            out.append((url, proc))
        urls = [url for url, _ in out]
        eventually(lambda: peered(urls), 30, "both Alertmanager replicas see a cluster of two, settled")
        yield out


def post_to_all(urls: list[str], starts: str, ends: str | None = None) -> int:
    """Post the alert to every replica, as Prometheus and the guard do; how many took it."""
    took = 0
    for url in urls:
        try:
            post_alert(url, starts, ends)
            took += 1
        except httpx.TransportError:  # a replica that is down
            pass
    return took


def test_a_clustered_pair_of_alertmanagers_drives_the_controllers_once_per_decision(
    tmp_path: Path, fresh: Cluster
) -> None:
    with start_gateway_admin(GW_TOKEN) as gw, ExitStack() as stack:
        pair = start_pair(tmp_path, fresh, gw, stack)
        leader_of(pair)
        replicas = stack.enter_context(
            am_cluster(tmp_path, alertmanager_config(tmp_path, *(c.port for c in pair), token=AM_TOKEN))
        )
        urls = [url for url, _ in replicas]
        starts = rfc3339_now()
        assert post_to_all(urls, starts) == 2
        gw.wait_for(lambda g: g.lanes == SHIFT50, 15, "slow shifted 50% to fast")

        killed_url, killed = random.choice(replicas)
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        assert post_to_all(urls, starts, ends=rfc3339_now()) == 1
        gw.wait_for(lambda g: g.lanes == {}, 20, f"the slow lane restored with {killed_url} killed")
        assert gw.states == [SHIFT50, {}]  # each step once: no replica, no controller acted twice
        check_router_history(gw)
        notified = sum(int(c.metrics_value("lanewatch_degrade_notifications_total", "applied")) for c in pair)
        assert notified >= 2  # the firing and the resolved notification, each decided by the leader
    events = [e for _, _, e, _ in audit(fresh)]
    assert events.count("apply") == 1 and events.count("restore") == 1, events
    assert events.count("fired") == 1 and events.count("resolved") == 1, events
