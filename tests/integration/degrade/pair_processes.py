"""A controller pair as real processes on one PostgreSQL, for the pair's tests."""

from __future__ import annotations

import json
import subprocess
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import yaml
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.degrade.shared_store import SharedStore, connect
from tests.postgres import Cluster
from tests.waiting import eventually

from .gateway_admin import GatewayAdmin
from .loopback import free_port, lanewatch_cmd, running, wait_http

AM_TOKEN = "am-token-pair-0042"
GW_TOKEN = "gw-token-pair-0043"
SHIFT50 = {"slow": {"shift_to": "fast", "shift_percent": 50, "cap_max_tokens": None, "shed_classes": []}}
LEASE_S, RENEW_DEADLINE_S, RETRY_S = 3.0, 2.0, 0.5


class Controller:
    """One controller process of the pair: its name, port and process."""

    def __init__(
        self, name: str, tmp: Path, pg: Cluster, gw: GatewayAdmin | list[dict[str, Any]], hold_s: float = 0.5
    ) -> None:
        """`gw`: the one gateway admin to drive, or `degrade.adapters` entries for several routers."""
        self.name, self.port, self.tmp, self.hold_s = name, free_port(), tmp, hold_s
        (tmp / "am.token").write_text(AM_TOKEN + "\n")
        (tmp / "gw.token").write_text(GW_TOKEN + "\n")
        shared = {
            "url": pg.url, "password_file": str(pg.password_file), "name": name,
            "lease_s": LEASE_S, "renew_deadline_s": RENEW_DEADLINE_S, "retry_s": RETRY_S,
        }  # fmt: skip
        degrade: dict[str, Any] = {"shared_store": shared}
        if isinstance(gw, list):
            degrade["adapters"] = gw
        self.config = tmp / f"{name}.yaml"
        self.config.write_text(yaml.safe_dump({"degrade": degrade}))
        self.gw = gw if isinstance(gw, GatewayAdmin) else None
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def cmd(self) -> list[str]:
        router = (
            ["--gateway", self.gw.url, "--gateway-token-file", str(self.tmp / "gw.token")] if self.gw else []
        )
        return lanewatch_cmd(
            "degrade", "serve", "-c", str(self.config), "--host", "127.0.0.1", "--port", str(self.port),
            "--token-file", str(self.tmp / "am.token"), *router, "--tick-s", "0.05",
            "--min-hold-s", str(self.hold_s), "--recovery-stable-s", "0.3", "--escalation-cooldown-s", "600",
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

    def metrics_value(self, name: str, outcome: str) -> float:
        """One `outcome` series of a counter on this controller's /metrics (0 when absent)."""
        text = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        prefix = f'{name}{{outcome="{outcome}"}} '
        return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))

    def leads_by_metrics(self) -> float:
        """Its `lanewatch_degrade_leader` gauge (what LanewatchDegradeNoLeader reads)."""
        text = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        return next(
            float(line.split()[1])
            for line in text.splitlines()
            if line.startswith("lanewatch_degrade_leader ")
        )

    def log(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.tmp.glob(f"{self.name}-*.log")))


def start_pair(tmp_path: Path, pg: Cluster, gw: GatewayAdmin, stack: ExitStack) -> list[Controller]:
    """Controllers `a` and `b` on the store, both driving `gw`, each started (closed with `stack`)."""
    pair = [Controller(n, tmp_path, pg, gw) for n in ("a", "b")]
    for c in pair:
        c.start(stack)
    return pair


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
    reader = SharedStore(lambda: connect(pg.url, pg.password(), 5.0), "test", readonly=True)
    try:
        return reader.audit_terms()
    finally:
        reader.close()
