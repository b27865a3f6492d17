"""Every failure the collector and the gateway exist to watch, through the real processes.

Each simulator fault in turn, an upstream that is down, a name that does not resolve, an
untrusted certificate and (gateway) a client that reads slowly or gives up: no crash, each
failure counted under its error kind in /metrics and in the records file, and the service
goes on working afterwards. A failure is attributed to a fault only by a record that started
while that fault was set, so one fault's late failures never pass for the next one's.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from lanewatch.collector.record.timing import RequestTiming
from tests.servers import SimHandle, closed_port, free_port, wait_listening
from tests.waiting import eventually, settled

from .flood import flood_upstream
from .processes import Service, errors_by_kind, rss_kib, samples, service, write_yaml

pytestmark = pytest.mark.integration

NOWHERE = "no-such-host.invalid"
# (fault body, error kind) in an order where no two neighbours share a kind.
COLLECTOR_FAULTS: dict[str, tuple[dict[str, Any], str]] = {
    "500": ({"error_rates": {"500": 1.0}}, "http_5xx"),
    "truncated": ({"truncate_after_tokens": 2}, "truncated"),
    "503": ({"error_rates": {"503": 1.0}}, "http_5xx"),
    "malformed": ({"malformed_after_tokens": 1}, "bad_stream"),
    "429": ({"error_rates": {"429": 1.0}}, "http_429"),
    # A queue delay or a stall lasts 6 s against the prober's 0.6 s and 0.5 s limits: a process
    # starved for a second on a loaded machine wakes to its timer and the late bytes together,
    # and must still see the bytes late (each request's own wait: nothing after it is held).
    "queue delay": ({"queue_delay_s": 6.0}, "ttft_timeout"),
    "stall": ({"stall_s": 6.0, "stall_after_tokens": 1}, "stall"),
    # every gap ~0.1 s, far under the 0.5 s stall limit; 32 of them run past the 2 s total
    "decode slowdown": ({"decode_slowdown": 40.0}, "timeout"),
    "refused connections": ({"refuse_connections_s": 1.0}, "connect_refused"),
    # last of the engine faults: its ~2.4 s prefill step holds the engine after it clears
    "prefill slowdown": ({"prefill_slowdown": 1000.0}, "ttft_timeout"),
}
PROBE_TIMEOUTS = {"connect_s": 2.0, "ttft_s": 0.6, "stall_s": 0.5, "total_s": 2.0}


def set_faults(sim: SimHandle, body: dict[str, Any] | None) -> None:
    with sim.client(headers=sim.admin_headers) as c:
        r = c.post("/admin/faults", json=body) if body is not None else c.delete("/admin/faults")
    r.raise_for_status()


def read_records(path: Path) -> list[RequestTiming]:
    """The whole lines of a records file written by a running process."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines(keepends=True)
    return [RequestTiming.from_json(json.loads(x)) for x in lines if x.endswith("\n")]


def wait_for(check: Callable[[], Any], within_s: float, what: str, svc: Service) -> Any:
    """Poll `check` while the service stays up; fail naming `what` (with the log) if it never holds."""

    def holds() -> Any:
        svc.alive()
        return check()

    return eventually(holds, within_s, what, context=lambda: svc.log()[-3000:])


def started_since(path: Path, target: str, since: float, kind: str | None) -> list[RequestTiming]:
    """Records of `target` that started after `since` (wall clock) and failed with `kind` (None: ok)."""
    return [
        r
        for r in read_records(path)
        if r.target == target and r.started_at > since and (r.error.value if r.error else None) == kind
    ]


def kinds_in(records: list[RequestTiming], target: str) -> Counter[str]:
    return Counter(r.error.value for r in records if r.target == target and r.error is not None)


def no_tracebacks(svc: Service) -> None:
    assert "Traceback" not in svc.log(), svc.log()[-4000:]


# ---------------------------------------------------------------- the collector


def collector_config(tmp_path: Path, sim: SimHandle, tls_sim: SimHandle, port: int) -> Path:
    targets = [
        {"name": "sim", "url": sim.url, "lane": "fast", "model": sim.model},
        {"name": "down", "url": f"http://127.0.0.1:{closed_port()}", "lane": "fast", "model": "m"},
        {"name": "nowhere", "url": f"http://{NOWHERE}:8000", "lane": "fast", "model": "m"},
        {"name": "untrusted", "url": tls_sim.url.replace("127.0.0.1", "localhost"), "model": tls_sim.model},
    ]
    return write_yaml(
        tmp_path / "collect.yaml",
        {
            "targets": targets,
            "probe": {
                "interval_s": 0.1,
                "jitter_ratio": 0.0,
                "connection": "cold",  # each probe connects: refused connections show
                "timeouts": PROBE_TIMEOUTS,
                "classes": [{"name": "short", "prompt_words": 8, "max_tokens": 32}],
            },
            "scrape": {"interval_s": 0.5, "timeout_s": 1.0},
            "otlp": {"join_wait_s": 0.2},
            "gpu": {"enabled": False},
            "server": {"host": "127.0.0.1", "port": port},
        },
    )


def test_collector_counts_every_fault_under_its_kind_and_keeps_probing(
    tmp_path: Path, sim: SimHandle, tls_sim: SimHandle
) -> None:
    port = free_port()
    cfg = collector_config(tmp_path, sim, tls_sim, port)
    records = tmp_path / "records.jsonl"
    args = ["collect", "-c", str(cfg), "--records", str(records)]
    with service(args, port, tmp_path / "collect.log", "/healthz") as col:
        for name, (body, kind) in COLLECTOR_FAULTS.items():
            since = time.time()
            set_faults(sim, body)
            try:
                wait_for(partial(started_since, records, "sim", since, kind), 10, f"{kind} ({name})", col)
            finally:
                if name == "refused connections":
                    wait_listening(sim.url, 1.0)  # the sim (its admin API too) listens again after 1 s
                set_faults(sim, None)
        cleared = time.time()
        wait_for(partial(started_since, records, "sim", cleared, None), 10, "success after the faults", col)
        seen = read_records(records)  # before the scrape: /metrics holds at least these
        text = col.metrics()
        assert httpx.get(f"{col.url}/healthz", timeout=5).json()["status"] == "ok"
        col.alive()
    expected = {"down": "connect_refused", "nowhere": "dns", "untrusted": "tls"}
    for target, kind in expected.items():
        assert set(kinds_in(seen, target)) == {kind}, (target, kinds_in(seen, target))
    for target in ("sim", *expected):
        counted = errors_by_kind(text, target=target)
        for kind, n in kinds_in(seen, target).items():
            assert counted.get(kind, 0) >= n, (target, kind, counted, n)
    assert set(kinds_in(seen, "sim")) >= {kind for _, kind in COLLECTOR_FAULTS.values()}
    up = {labels["target"]: v for labels, v in samples(text, "lanewatch_scrape_up")}
    assert up == {"sim": 1.0, "down": 0.0, "nowhere": 0.0, "untrusted": 0.0}
    no_tracebacks(col)


# ---------------------------------------------------------------- the gateway

# (fault body, status the client gets, error kind of the tap's record; None = a success)
GATEWAY_FAULTS: dict[str, tuple[dict[str, Any], int, str | None]] = {
    "500": ({"error_rates": {"500": 1.0}}, 500, "http_5xx"),
    "truncated": ({"truncate_after_tokens": 2}, 200, "truncated"),
    "503": ({"error_rates": {"503": 1.0}}, 503, "http_5xx"),
    "malformed": ({"malformed_after_tokens": 1}, 200, "bad_stream"),
    "429": ({"error_rates": {"429": 1.0}}, 429, "http_429"),
    # read_timeout_s is 1 s; 6 s of silence stays a timeout even if the gateway is starved a while
    "queue delay": ({"queue_delay_s": 6.0}, 200, "ttft_timeout"),
    "stall": ({"stall_s": 6.0, "stall_after_tokens": 1}, 200, "stall"),
    "decode slowdown": ({"decode_slowdown": 20.0}, 200, None),  # slow (~50 ms gaps), not broken
    "prefill slowdown": ({"prefill_slowdown": 1000.0}, 200, "ttft_timeout"),
}
FLOOD_FRAMES = 128 * 1024  # 128 MiB of ~1 KiB events


def gateway_config(tmp_path: Path, port: int, lanes: dict[str, str]) -> Path:
    return write_yaml(
        tmp_path / "gateway.yaml",
        {
            "gateway": {
                "server": {"host": "127.0.0.1", "port": port},
                "lanes": {lane: {"upstreams": [url]} for lane, url in lanes.items()},
                "read_timeout_s": 1.0,
                "connect_timeout_s": 2.0,
                "health_interval_s": 0.5,
                "hints": {
                    "trusted_networks": ["127.0.0.0/8"]
                },  # the test chooses lanes with x-lanewatch-lane
            }
        },
    )


def chat(max_tokens: int = 8, **extra: Any) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": max_tokens, "stream": True}
    return {"model": "meta-llama/Llama-3.2-1B-Instruct", "ignore_eos": True, **body, **extra}


def send(gw: Service, lane: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    with httpx.Client(timeout=15) as c:
        r = c.post(f"{gw.url}/v1/chat/completions", json=body or chat(), headers={"x-lanewatch-lane": lane})
        return r.status_code, r.content


def tap_record(path: Path, lane: str, since: float, gw: Service) -> RequestTiming:
    """The one record of `lane` that started after `since` (the tap writes it as the response ends)."""
    found: list[RequestTiming] = wait_for(
        lambda: [r for r in read_records(path) if r.lane == lane and r.started_at > since],
        5,
        f"tap record of lane {lane}",
        gw,
    )
    return found[-1]


def test_gateway_counts_every_fault_under_its_kind_and_keeps_serving(
    tmp_path: Path, sim: SimHandle, tls_sim: SimHandle
) -> None:
    port = free_port()
    lanes = {
        "sim": sim.url,
        "down": f"http://127.0.0.1:{closed_port()}",
        "nowhere": f"http://{NOWHERE}:8000",
        "untrusted": tls_sim.url.replace("127.0.0.1", "localhost"),
    }
    records = tmp_path / "tap.jsonl"
    args = ["gateway", "-c", str(gateway_config(tmp_path, port, lanes)), "--records", str(records)]
    with service(args, port, tmp_path / "gateway.log", "/metrics") as gw:
        assert send(gw, "sim")[0] == 200
        for name, (body, status, kind) in GATEWAY_FAULTS.items():
            since = time.time()
            set_faults(sim, body)
            try:
                got, _ = send(gw, "sim")
            finally:
                set_faults(sim, None)
            record = tap_record(records, "sim", since, gw)
            assert (got, record.error.value if record.error else None) == (status, kind), name
        for lane, kind in {"down": "connect_refused", "nowhere": "dns", "untrusted": "tls"}.items():
            since = time.time()
            got, text = send(gw, lane)
            assert got == 502 and json.loads(text)["error"]["code"] == 502, text
            assert tap_record(records, lane, since, gw).error.value == kind  # type: ignore[union-attr]
        wait_for(lambda: send(gw, "sim")[0] == 200, 10, "the sim free of the slow prefill", gw)
        refused = refused_connections(gw, sim, records)
        wait_for(lambda: send(gw, "sim")[0] == 200, 10, "a success once the faults cleared", gw)
        seen = read_records(records)
        exposition = gw.metrics()
        gw.alive()
    for lane in lanes:
        counted = errors_by_kind(exposition, lane=lane, source="tap")
        for kind, n in Counter(r.error.value for r in seen if r.lane == lane and r.error).items():
            assert counted.get(kind, 0) >= n, (lane, kind, counted)
    assert refused >= 1
    no_tracebacks(gw)


def refused_connections(gw: Service, sim: SimHandle, records: Path) -> int:
    """Refused connections: requests beyond the gateway's idle keep-alive connections are refused."""
    since = time.time()
    set_faults(sim, {"refuse_connections_s": 1.0})
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(send(gw, "sim")[0])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    wait_listening(sim.url, 1.0)  # the sim (its admin API too) listens again after 1 s
    set_faults(sim, None)
    failed = [r for r in read_records(records) if r.lane == "sim" and r.started_at > since and r.error]
    assert {r.error.value for r in failed if r.error} <= {"connect_refused"}, failed
    assert results.count(502) == len(failed)
    return len(failed)


def test_gateway_back_pressure_and_a_client_that_gives_up(tmp_path: Path) -> None:
    port = free_port()
    with flood_upstream(FLOOD_FRAMES) as flood:
        records = tmp_path / "tap.jsonl"
        args = ["gateway", "-c", str(gateway_config(tmp_path, port, {"flood": flood.url}))]
        with service([*args, "--records", str(records)], port, tmp_path / "gateway.log", "/metrics") as gw:
            base = rss_kib(gw.pid)
            with slow_client(port) as sock:
                # not reading: the gateway must stop reading the flood; measure once the upstream stalls
                held_written = settled(lambda: flood.written, 0.5, 20, "the flood upstream stalls")
                held_rss = rss_kib(gw.pid) - base
                frames, size, tail = read_all(sock)
            assert (frames, size) == (FLOOD_FRAMES, flood.body_bytes) and tail.endswith(b"data: [DONE]\n\n")
            assert held_written < flood.body_bytes // 2, held_written  # it waited for the client
            assert held_rss < 16 * 1024, held_rss  # and did not buffer the flood in memory
            with slow_client(port) as sock:
                sock.recv(1024)  # the stream has begun; then the client hangs up mid-stream
            # the client hung up mid-stream: counted, and the flood upstream is let go
            record = wait_for(
                lambda: [r for r in read_records(records) if r.error], 5, "client_disconnect record", gw
            )[-1]
            assert record.error.value == "client_disconnect"
            wait_for(lambda: flood.broken >= 1, 5, "the upstream let go", gw)
            text = gw.metrics()
            gw.alive()
    assert errors_by_kind(text, lane="flood") == {"client_disconnect": 1.0}
    assert [r.ok for r in read_records(records)][:1] == [True]
    no_tracebacks(gw)


class _Closing:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def __enter__(self) -> socket.socket:
        return self.sock

    def __exit__(self, *_: object) -> None:
        self.sock.close()


def slow_client(port: int) -> _Closing:
    """A raw HTTP/1.0 client (a close-delimited body) with a small receive buffer, its request sent."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(("127.0.0.1", port))
    body = json.dumps(chat(4)).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return _Closing(sock)


def read_all(sock: socket.socket) -> tuple[int, int, bytes]:
    """Read to the end: (events, body bytes, the body's last bytes), keeping little in memory."""
    sock.settimeout(30)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, _, carry = buf.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n", 1)[0], head
    events, size, tail = 0, len(carry), carry[-64:]
    while data := sock.recv(1 << 20):
        size += len(data)
        tail = (tail + data)[-64:]
        joined = carry + data
        cut = joined.rfind(b"\n\n") + 2  # count whole events; carry the rest over
        events += joined[:cut].count(b"data: {")
        carry = joined[cut:]
    return events + carry.count(b"data: {"), size, tail
