"""The request-head timeout and connection cap, against a real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn

from lanewatch.collector.common.serving import (
    ServeLimits,
    head_timeout_protocol,
    limits_of,
    uvicorn_config,
)
from lanewatch.collector.config import ServerConfig
from tests.waiting import eventually

HEAD_TIMEOUT_S = 1.5


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A minimal ASGI app: 200 `ok`, after `/slow` waits a while."""
    assert scope["type"] == "http"
    if scope["path"] == "/slow":
        await asyncio.sleep(1.0)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def serving(limits: ServeLimits) -> Iterator[int]:
    """A uvicorn server with `limits` on a thread; yields its port."""
    sock = socket.create_server(("127.0.0.1", 0))
    config = uvicorn_config(_app, limits, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    eventually(lambda: server.started, 10, "the uvicorn server started", every_s=0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _closed_after(sock: socket.socket, trickle: bytes, limit_s: float) -> tuple[float, bytes]:
    """Send `trickle` one byte a second until the server closes; (seconds until then, what it sent)."""
    start = time.monotonic()
    sock.settimeout(1.0)
    got = b""
    for byte in trickle:
        try:
            sock.sendall(bytes([byte]))
        except OSError:  # reset: closed
            break
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            break
        got += chunk
        if not chunk or b"\r\n\r\n" in got:
            break
        if time.monotonic() - start > limit_s:
            break
    return time.monotonic() - start, got


SLOW_HEAD = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 60 + b"\r\n\r\n"


def test_a_one_byte_a_second_head_is_closed_within_the_timeout_and_others_are_served() -> None:
    with serving(ServeLimits(max_connections=16, keep_alive_s=5, head_timeout_s=HEAD_TIMEOUT_S)) as port:
        slow = socket.create_connection(("127.0.0.1", port))
        result: list[tuple[float, bytes]] = []
        trickler = threading.Thread(target=lambda: result.append(_closed_after(slow, SLOW_HEAD, 30)))
        trickler.start()
        time.sleep(0.3)
        # while the slow head is open, a normal client is answered at once
        with httpx.Client(timeout=5) as client:
            for _ in range(3):
                assert client.get(f"http://127.0.0.1:{port}/").text == "ok"
        trickler.join(40)
        slow.close()
    elapsed, answer = result[0]
    assert HEAD_TIMEOUT_S - 0.5 <= elapsed <= HEAD_TIMEOUT_S + 5  # without the timeout: ~75 s of bytes
    assert answer.startswith(b"HTTP/1.1 408 ")


def test_a_connection_that_sends_nothing_is_closed_silently() -> None:
    with serving(ServeLimits(head_timeout_s=HEAD_TIMEOUT_S)) as port:
        idle = socket.create_connection(("127.0.0.1", port))
        idle.settimeout(HEAD_TIMEOUT_S + 8)
        start = time.monotonic()
        assert idle.recv(100) == b""  # closed, no 408 for a request that never began
        assert time.monotonic() - start <= HEAD_TIMEOUT_S + 5
        idle.close()


def test_a_slow_head_on_a_kept_alive_connection_is_closed_too() -> None:
    with serving(ServeLimits(keep_alive_s=30, head_timeout_s=HEAD_TIMEOUT_S)) as port:
        conn = socket.create_connection(("127.0.0.1", port))
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        conn.settimeout(5)
        first = b""
        while not first.endswith(b"\r\n\r\nok"):  # the whole first response, however it is split
            chunk = conn.recv(4096)
            assert chunk, first
            first += chunk
        assert first.startswith(b"HTTP/1.1 200 ")
        elapsed, answer = _closed_after(conn, SLOW_HEAD, 30)  # keep-alive 30 s would not close it
        conn.close()
    assert elapsed <= HEAD_TIMEOUT_S + 5
    assert answer.startswith(b"HTTP/1.1 408 ")


def test_a_slow_response_is_not_cut_by_the_head_timeout() -> None:
    with serving(ServeLimits(head_timeout_s=0.5)) as port, httpx.Client(timeout=5) as client:
        assert client.get(f"http://127.0.0.1:{port}/slow").text == "ok"  # 1 s answer, 0.5 s head timeout


def test_requests_past_the_connection_cap_get_503() -> None:
    with serving(ServeLimits(max_connections=2, head_timeout_s=30)) as port:
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        time.sleep(0.2)
        with httpx.Client(timeout=5) as client:
            assert client.get(f"http://127.0.0.1:{port}/").status_code == 503
        for s in held:
            s.close()
        time.sleep(0.2)
        with httpx.Client(timeout=5) as client:
            assert client.get(f"http://127.0.0.1:{port}/").status_code == 200


def test_limits_come_from_the_server_section_and_reach_uvicorn() -> None:
    limits = limits_of(ServerConfig(max_connections=7, keep_alive_s=3, head_timeout_s=2.5))
    assert limits == ServeLimits(7, 3, 2.5)
    config = uvicorn_config(_app, limits)
    config.load()
    assert (config.limit_concurrency, config.timeout_keep_alive) == (7, 3)
    assert config.http_protocol_class.head_timeout_s == 2.5  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="head_timeout_s"):
        head_timeout_protocol(0)
