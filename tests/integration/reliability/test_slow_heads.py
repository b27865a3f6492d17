"""Slowloris against the uvicorn services: a request head sent one byte a second is cut off.

The collector and the degrade controller take their head timeout from `server.head_timeout_s`
(2 s here); the simulator has a fixed 10 s. Each slow connection must be answered 408 and
closed within its timeout plus a margin, while a normal client on another connection is
answered as usual. Without the timeout all three keep such a head open for minutes.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port
from tests.waiting import eventually

from .processes import Service, service, write_yaml

pytestmark = pytest.mark.integration

SHORT_S = 2.0  # the collector's and controller's configured head timeout
SIM_S = 10.0  # the simulator's fixed one
MARGIN_S = 6.0
HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"


def trickle(port: int, limit_s: float, opened: list[int] | None = None) -> tuple[float, bytes]:
    """Send HEAD one byte a second until the server closes or `limit_s` passes; (seconds, answer).

    The port is appended to `opened` once the connection is up and its first byte sent.
    """
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(1.0)
    start, got = time.monotonic(), b""
    try:
        for byte in HEAD:
            if time.monotonic() - start > limit_s:
                break
            try:
                sock.sendall(bytes([byte]))
                if opened is not None and len(got) == 0 and port not in opened:
                    opened.append(port)
                chunk = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            got += chunk
            if not chunk:
                break
    finally:
        sock.close()
    return time.monotonic() - start, got


@contextmanager
def services(tmp_path: Path) -> Iterator[dict[str, tuple[Service, float]]]:
    """The collector, the degrade controller and the simulator; name -> (service, head timeout)."""
    ports = {name: free_port() for name in ("collect", "degrade", "sim")}
    collect_cfg = write_yaml(
        tmp_path / "collect.yaml",
        {
            "targets": [],
            "otlp": {"enabled": False},
            "gpu": {"enabled": False},
            "server": {"host": "127.0.0.1", "port": ports["collect"], "head_timeout_s": SHORT_S},
        },
    )
    degrade = [
        "degrade", "serve", "--port", str(ports["degrade"]), "--insecure-dev", "--adapter", "dry-run",
        "--state-dir", str(tmp_path / "state"),
    ]  # fmt: skip
    env = {"LANEWATCH__DEGRADE__SERVER__HEAD_TIMEOUT_S": str(SHORT_S)}
    with ExitStack() as stack:
        col = stack.enter_context(
            service(["collect", "-c", str(collect_cfg)], ports["collect"], tmp_path / "c.log", "/healthz")
        )
        ctl = stack.enter_context(service(degrade, ports["degrade"], tmp_path / "d.log", "/healthz", env))
        sim = stack.enter_context(
            service(["sim", "--port", str(ports["sim"])], ports["sim"], tmp_path / "s.log", "/health")
        )
        yield {"collect": (col, SHORT_S), "degrade": (ctl, SHORT_S), "sim": (sim, SIM_S)}


def test_slow_request_heads_are_closed_and_other_clients_still_served(tmp_path: Path) -> None:
    with services(tmp_path) as running:
        results: dict[str, tuple[float, bytes]] = {}
        opened: list[int] = []
        threads = [
            threading.Thread(
                target=lambda n=name, s=svc, t=timeout: results.__setitem__(
                    n, trickle(int(s.url.rsplit(":", 1)[1]), t + MARGIN_S, opened)
                )
            )
            for name, (svc, timeout) in running.items()
        ]
        for t in threads:
            t.start()
        eventually(lambda: len(opened) == len(threads), 10, "every slow head open", every_s=0.01)
        with httpx.Client(timeout=5) as client:  # normal clients while the slow heads are open
            for name, (svc, _) in running.items():
                path = "/health" if name == "sim" else "/healthz"
                assert client.get(svc.url + path).status_code == 200, name
        for t in threads:
            t.join(SIM_S + MARGIN_S + 10)
        for svc, _ in running.values():
            svc.alive()
    for name, (_, timeout) in running.items():
        elapsed, answer = results[name]
        assert timeout - 1.0 <= elapsed <= timeout + MARGIN_S, (name, elapsed)
        assert answer.startswith(b"HTTP/1.1 408 "), (name, answer[:80])
