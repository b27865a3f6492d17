"""`lanewatch diagnose --prometheus` against a Prometheus that trickles its answer: each query and the
whole run end at their deadlines with a clear error and exit 2, however slowly the bytes come."""

from __future__ import annotations

import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lanewatch.collector.diagnose.prometheus import PrometheusError, PrometheusSource
from tests.servers import lanewatch_command

pytestmark = pytest.mark.integration

BYTE_EVERY_S = 0.5  # one byte of the answer this often: 120 bytes would take 60 s
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 120\r\n\r\n"


@contextmanager
def trickling(*, headers_too: bool) -> Iterator[str]:
    """A loopback HTTP server answering every request a byte at a time (its headers too, if asked)."""
    stop = threading.Event()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn: socket.socket = self.request
            conn.recv(65536)
            answer = HEADERS + b" " * 120
            sent = 0 if headers_too else len(HEADERS)
            if sent:
                conn.sendall(answer[:sent])
            while sent < len(answer) and not stop.wait(BYTE_EVERY_S):
                try:
                    conn.sendall(answer[sent : sent + 1])
                except OSError:  # the client gave up
                    return
                sent += 1

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("headers_too", [False, True], ids=["body", "headers"])
def test_a_trickled_answer_ends_the_query_at_its_deadline(headers_too: bool) -> None:
    with trickling(headers_too=headers_too) as url:
        prom = PrometheusSource(url, timeout_s=1.0)
        started = time.monotonic()
        with pytest.raises(PrometheusError, match=r"within its 1 s \(--query-timeout\)"):
            prom.query("up")
        took = time.monotonic() - started
        prom.close()
    # a byte every 0.5 s kept a 10 s read timeout from ever firing: 60 s and more before
    assert 0.9 < took < 10.0


@pytest.mark.parametrize(
    ("flags", "named"), [(["--query-timeout", "1"], "--query-timeout"), (["--deadline", "1"], "--deadline")]
)
def test_the_cli_exits_2_at_a_query_or_run_deadline_naming_its_flag(flags: list[str], named: str) -> None:
    with trickling(headers_too=False) as url:
        started = time.monotonic()
        done = subprocess.run(
            [*lanewatch_command(), "diagnose", "--prometheus", url, "--lane", "slow", *flags],
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert "lanewatch diagnose: --prometheus:" in done.stderr and f"1 s ({named})" in done.stderr
    assert took < 15.0  # the interpreter's start included; the trickle lasts 60 s
