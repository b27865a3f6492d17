"""The handler's degrade endpoint against hostile clients, over real sockets on 127.0.0.1.

A Content-Length no server should read (negative, not a whole number, sent twice, over the
bound, missing on a PUT) is refused before a byte of the body is read; a connection whose
request does not arrive within the endpoint's time is closed, however slowly it dribbles; and
past the connection cap one more connection is refused at once instead of taking a thread.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lanewatch.integrations.litellm.degrade import AdminServer, DegradeHolder, body_length, serve_admin

TOKEN = "admin-token"
AUTH = f"Authorization: Bearer {TOKEN}\r\n"
GOOD = json.dumps({"lanes": {"slow": {"shift_to": "fast", "shift_percent": 50}}, "revision": 1}).encode()
WAIT_S = 5.0  # a client's patience for an answer that should come at once


@contextmanager
def endpoint(**kw: float | int) -> Iterator[tuple[AdminServer, DegradeHolder, int]]:
    holder = DegradeHolder(("fast", "slow"))
    server = serve_admin(holder, "127.0.0.1", 0, TOKEN, **kw)  # type: ignore[arg-type]
    try:
        yield server, holder, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    return sock


def answer(sock: socket.socket) -> bytes:
    """All the server sends until it closes (or the client's patience ends)."""
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return out


def put(port: int, length_header: str | None, body: bytes = b"") -> tuple[int, str]:
    """A PUT with the given Content-Length header line (None: none) and `body`; (status, message)."""
    head = f"PUT /admin/degrade HTTP/1.1\r\nHost: x\r\n{AUTH}"
    if length_header is not None:
        head += f"Content-Length: {length_header}\r\n"
    with connect(port) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)  # the connection stays open: no EOF to read up to
        raw = answer(sock)
    assert raw, "no answer within the client's patience"
    status = int(raw.split(b" ", 2)[1])
    message = json.loads(raw.split(b"\r\n\r\n", 1)[1]).get("error", {}).get("message", "")
    return status, message


@pytest.mark.parametrize(
    ("header", "status"),
    [("-1", 400), ("1.5", 400), ("+5", 400), ("0x10", 400), ("5, 5", 400), ("", 400), ("70000", 413)],
)
def test_a_content_length_no_server_should_read_is_refused_at_once(header: str, status: int) -> None:
    with endpoint() as (_, holder, port):
        started = time.monotonic()
        got, message = put(port, header, b"{")  # a body that never reaches the length or EOF
        assert (got, "Content-Length" in message) == (status, True), message
        assert time.monotonic() - started < WAIT_S / 2
        assert holder.state.revision is None  # nothing taken


def test_a_put_without_a_length_is_411_and_one_with_it_is_taken() -> None:
    with endpoint() as (_, holder, port):
        assert put(port, None, GOOD)[0] == 411
        status, _ = put(port, str(len(GOOD)), GOOD)
        assert status == 200 and holder.state.revision == 1


def test_the_length_reader_names_each_refusal() -> None:
    assert body_length(None, "GET") == (0, None)
    assert body_length(["12"], "PUT") == (12, None)
    assert body_length(["12", "12"], "PUT")[0] == 400
    assert body_length(["١٢"], "PUT")[0] == 400  # digits, but not ASCII ones
    assert body_length(None, "PUT") == (411, "Content-Length: required on a PUT")


def test_a_connection_that_stalls_or_dribbles_is_closed_by_the_deadline() -> None:
    timeout_s = 0.5
    with endpoint(timeout_s=timeout_s) as (_, _, port), connect(port) as idle, connect(port) as dribbler:
        idle.sendall(b"PUT /admin/degrade HTTP/1.1\r\nHost: x\r\n")  # half a head, then silence
        started = time.monotonic()
        dribbler.settimeout(0.05)
        closed_at = None
        for byte in b"PUT /admin/degrade HTTP/1.1\r\nHost: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n":
            try:
                dribbler.sendall(bytes([byte]))
                if dribbler.recv(1024) == b"":
                    closed_at = time.monotonic()
                    break
            except TimeoutError:
                pass
            except OSError:  # reset: closed
                closed_at = time.monotonic()
                break
            time.sleep(0.05)  # one byte every 0.1 s: each read comes well within any per-read timeout
        assert closed_at is not None, "the dribbling connection was never closed"
        assert closed_at - started < timeout_s + 2.0
        assert answer(idle) == b""  # closed without an answer
        assert time.monotonic() - started < timeout_s + 3.0


def test_past_the_cap_a_connection_is_refused_at_once_and_takes_no_thread() -> None:
    cap, extra = 4, 30
    with endpoint(timeout_s=3.0, max_connections=cap) as (server, _, port):
        threads = threading.active_count()
        held = [connect(port) for _ in range(cap)]
        try:
            for sock in held:
                sock.sendall(b"PUT /admin/degrade HTTP/1.1\r\n")  # each holds a slot, half-sent
            time.sleep(0.3)
            refused = []
            for _ in range(extra):
                with connect(port) as sock:  # it reads first: its request would be refused unread
                    started = time.monotonic()
                    raw = answer(sock)
                    refused.append((raw.split(b"\r\n", 1)[0], time.monotonic() - started < WAIT_S / 2))
            assert set(refused) == {(b"HTTP/1.0 503 Service Unavailable", True)}, refused[:3]
            assert server.refused == extra
            assert threading.active_count() <= threads + cap
        finally:
            for sock in held:
                sock.close()
        # the held connections gone, the endpoint serves again
        deadline = time.monotonic() + WAIT_S
        while True:
            with connect(port) as sock:
                sock.sendall(b"GET /admin/degrade HTTP/1.1\r\n" + AUTH.encode() + b"\r\n")
                first = answer(sock).split(b"\r\n", 1)[0]
            if first.endswith(b"200 OK") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert first.endswith(b"200 OK"), first
