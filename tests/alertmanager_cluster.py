"""Two Alertmanager 0.25 replicas peered by gossip on loopback: their commands, and when they are peered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.conftest import require_binary
from tests.servers import free_port


def replica_commands(folder: Path, config: Path) -> list[tuple[list[str], str]]:
    """(command, web URL) of each of two replicas, each naming the other as its peer."""
    binary = require_binary("prometheus-alertmanager")
    web, gossip = [free_port(), free_port()], [free_port(), free_port()]
    out = []
    for i in (0, 1):
        cmd = [
            binary, f"--config.file={config}", f"--storage.path={folder / f'am-{i}'}",
            f"--web.listen-address=127.0.0.1:{web[i]}",
            f"--cluster.listen-address=127.0.0.1:{gossip[i]}",
            f"--cluster.advertise-address=127.0.0.1:{gossip[i]}",
            f"--cluster.peer=127.0.0.1:{gossip[1 - i]}",
            # brief for a test: how long the second replica waits on the first before it sends
            # too, and how often a replica retries a peer that was not up yet
            "--cluster.peer-timeout=1s", "--cluster.reconnect-interval=1s",
            "--cluster.gossip-interval=50ms", "--cluster.pushpull-interval=2s",
        ]  # fmt: skip
        out.append((cmd, f"http://127.0.0.1:{web[i]}"))
    return out


def peered(urls: list[str]) -> bool:
    """Every replica sees a settled cluster of all of them."""
    for url in urls:
        try:
            cluster: dict[str, Any] = httpx.get(f"{url}/api/v2/status", timeout=2).json()["cluster"]
        except httpx.HTTPError:
            return False
        if cluster.get("status") != "ready" or len(cluster.get("peers") or []) != len(urls):
            return False
    return True
