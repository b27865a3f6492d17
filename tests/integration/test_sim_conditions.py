"""Conditions the simulator produces on purpose, as a client on 127.0.0.1 sees them: speculative
decoding's multi-token chunks, a slow front end, chunked-prefill stalls, idle keep-alive closes."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import ssl
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.probe.prober import Prober, ProbeSpec
from lanewatch.collector.probe.settings import Target
from lanewatch.collector.record.timing import RequestTiming
from tests.servers import SimHandle, start_simulator
from tests.waiting import eventually

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "Tell me something."}]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    """A fast simulator with every default."""
    with start_simulator(tmp_path_factory.mktemp("plain")) as handle:
        yield handle


def stream_chunks(sim: SimHandle, body: dict[str, Any], rid: str = "") -> list[tuple[float, dict[str, Any]]]:
    """(perf-clock time, parsed chunk) for every `data:` frame but [DONE]."""
    out: list[tuple[float, dict[str, Any]]] = []
    headers = {"x-request-id": rid} if rid else {}
    payload = {"model": sim.model, "ignore_eos": True, "stream": True, **body}
    with (
        sim.client(timeout=30) as c,
        c.stream("POST", "/v1/chat/completions", json=payload, headers=headers) as r,
    ):
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                out.append((time.perf_counter(), json.loads(line[6:])))
    return out


def contents(chunks: list[tuple[float, dict[str, Any]]]) -> list[tuple[float, str]]:
    """(time, text) of the content chunks (not the role chunk, not the usage chunk)."""
    return [
        (t, c["choices"][0]["delta"]["content"])
        for t, c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("content")
    ]


def test_speculative_decoding_streams_a_steps_tokens_as_one_chunk_and_counts_drafts(tmp_path: Path) -> None:
    with start_simulator(tmp_path, num_speculative_tokens=3, spec_acceptance=1.0) as sim:
        body = {"messages": MESSAGES, "max_tokens": 13, "stream_options": {"include_usage": True}}
        chunks = stream_chunks(sim, body)
        words = [len(text.split()) for _t, text in contents(chunks)]
        assert words == [1, 4, 4, 4]  # the first token from prefill, then 1 + 3 accepted per step
        assert chunks[-1][1]["usage"]["completion_tokens"] == 13
        with sim.client() as c:
            page = c.get("/metrics").text
    samples = {
        (s.name, s.labels.get("position")): s.value
        for f in text_string_to_metric_families(page)
        if f.name.startswith("vllm:spec_decode")
        for s in f.samples
        if s.name.endswith("_total")
    }
    assert samples == {
        ("vllm:spec_decode_num_drafts_total", None): 3.0,
        ("vllm:spec_decode_num_draft_tokens_total", None): 9.0,
        ("vllm:spec_decode_num_accepted_tokens_total", None): 9.0,
        ("vllm:spec_decode_num_accepted_tokens_per_pos_total", "0"): 3.0,
        ("vllm:spec_decode_num_accepted_tokens_per_pos_total", "1"): 3.0,
        ("vllm:spec_decode_num_accepted_tokens_per_pos_total", "2"): 3.0,
    }


def test_spec_decode_families_are_absent_by_default(plain: SimHandle) -> None:
    with plain.client() as c:
        assert "vllm:spec_decode" not in c.get("/metrics").text


def front_end_residual(sim: SimHandle, rid: str) -> tuple[float, dict[str, Any]]:
    """Client TTFT and the ground truth of one streamed request."""
    start = time.perf_counter()
    chunks = stream_chunks(sim, {"messages": MESSAGES, "max_tokens": 4}, rid)
    client_ttft = contents(chunks)[0][0] - start
    return client_ttft, sim.truth(rid)


def test_a_slow_front_end_shows_in_ttft_and_not_in_the_engines_phases(
    tmp_path: Path, plain: SimHandle
) -> None:
    # margins of half the delay: a loaded host's event loop adds lag to every server-side figure
    with start_simulator(tmp_path, frontend_s=1.0) as sim:
        client_ttft, truth = front_end_residual(sim, "front-slow")
    assert client_ttft >= 1.0
    assert truth["ttft_s"] >= 1.0
    assert truth["queue_s"] + truth["prefill_s"] < 0.5  # the span's queue and prefill attributes
    _base_ttft, base = front_end_residual(plain, "front-default")
    assert base["ttft_s"] - base["queue_s"] - base["prefill_s"] < 0.5


def test_the_front_end_fault_adds_its_delay_at_run_time(plain: SimHandle) -> None:
    with plain.client() as c:
        body = {"frontend_delay_s": 1.0}
        c.post("/admin/faults", json=body, headers=plain.admin_headers).raise_for_status()
        try:
            client_ttft, truth = front_end_residual(plain, "front-fault")
        finally:
            c.delete("/admin/faults", headers=plain.admin_headers).raise_for_status()
    assert client_ttft >= 1.0
    assert truth["ttft_s"] - truth["queue_s"] - truth["prefill_s"] >= 1.0
    assert truth["queue_s"] + truth["prefill_s"] < 0.5


def decode_gaps_with_long_prompts(sim: SimHandle) -> list[list[float]]:
    """Client-side token gaps of two decoding streams while two ~2,000-token prompts arrive."""
    times: list[list[float]] = [[], []]

    def decode(i: int) -> None:
        chunks = stream_chunks(sim, {"messages": MESSAGES, "max_tokens": 50}, f"decode-{i}")
        times[i] = [t for t, _text in contents(chunks)]

    threads = [threading.Thread(target=decode, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    long_body = {"messages": [{"role": "user", "content": "word " * 1990}], "max_tokens": 1}
    # the long prompts go in once both streams are decoding (their first tokens are out)
    eventually(lambda: _decoding(sim), 20, "two decoding streams")
    with sim.client(timeout=30) as c:
        for _ in range(2):
            c.post("/v1/chat/completions", json={"model": sim.model, "ignore_eos": True, **long_body})
    for t in threads:
        t.join(60)
    return [[b - a for a, b in itertools.pairwise(ts)] for ts in times]


def _decoding(sim: SimHandle) -> bool:
    with sim.client() as c:
        page = c.get("/metrics").text
    running = [
        s.value
        for f in text_string_to_metric_families(page)
        if f.name == "vllm:num_requests_running"
        for s in f.samples
    ]
    return running == [2.0]


def test_long_prompts_stall_running_decodes_and_a_smaller_budget_shortens_the_stall(tmp_path: Path) -> None:
    with start_simulator(tmp_path, profile="slow") as sim:
        default = decode_gaps_with_long_prompts(sim)
    with start_simulator(tmp_path, profile="slow", max_num_batched_tokens=256) as sim:
        small = decode_gaps_with_long_prompts(sim)
    for gaps in default + small:
        assert len(gaps) == 49
    p50 = statistics.median(g for gaps in default for g in gaps)  # one slow decode step, ~30 ms
    worst = max(g for gaps in default for g in gaps)  # the step with a 2,048-token chunk, ~0.35 s
    assert worst > 4 * p50
    # 256-token chunks: ~0.045 s by the model, up to ~0.09 s measured on a loaded host
    assert max(g for gaps in small for g in gaps) < worst / 2


def read_response(sock: socket.socket) -> bytes:
    """One whole response to GET /health (empty body) from a blocking socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"closed before the response ended: {data!r}"
        data += chunk
    return data


def idle_open_for(sim: SimHandle, limit_s: float) -> float | None:
    """Seconds an idle kept-alive connection stays open after a response, or None past `limit_s`."""
    with socket.create_connection(("127.0.0.1", sim.port), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        assert read_response(sock).startswith(b"HTTP/1.1 200")
        idle_since = time.monotonic()
        sock.settimeout(limit_s)
        try:
            assert sock.recv(4096) == b""  # the server closed it
        except TimeoutError:
            return None
        return time.monotonic() - idle_since


def test_idle_keep_alive_connections_close_after_the_configured_time(
    tmp_path: Path, plain: SimHandle
) -> None:
    with start_simulator(tmp_path, keep_alive_s=1) as sim:
        closed_after = idle_open_for(sim, 10)
    assert closed_after is not None
    assert 0.9 <= closed_after < 4
    assert idle_open_for(plain, 3) is None  # the default (30 s) keeps it open


def connect_and_handshake(sim: SimHandle) -> tuple[float, float]:
    """Seconds to connect over TCP, then to complete the TLS handshake (and then GET /health)."""
    context = ssl.create_default_context(cafile=str(sim.cert_path))
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as raw:
        connected = time.perf_counter()
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            shaken = time.perf_counter()
            tls.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            assert read_response(tls).startswith(b"HTTP/1.1 200")
    return connected - start, shaken - connected


async def cold_probe(sim: SimHandle) -> RequestTiming:
    target = Target(name="sim", url=sim.url, model=sim.model, cacert=sim.cert_path)
    async with Prober(target, connection="cold") as p:
        return await p.probe(ProbeSpec("short", "chat", 1, prompt="hello"))


def test_the_slow_handshake_fault_delays_tls_and_not_the_connect(tmp_path: Path) -> None:
    with start_simulator(tmp_path, tls=True, faults={"tls_handshake_delay_s": 1.0}) as sim:
        connect_s, tls_s = connect_and_handshake(sim)
        # margins of half the delay: a loaded host's event loop lags every handshake a little.
        # Below, 10 ms: the delay counts from the server's accept, which the client's clock may
        # see a little after its connect began, and asyncio runs a timer up to its clock's
        # resolution early (0.99982 s was seen).
        assert connect_s < 0.5
        assert 0.99 <= tls_s < 3.0
        probed = asyncio.run(cold_probe(sim))  # the probe puts it in its TLS phase
        assert probed.ok, probed.error
        assert probed.tls_s is not None and probed.connect_s is not None
        assert probed.tls_s >= 0.99 and probed.connect_s < 0.5
        with sim.client() as c:
            c.delete("/admin/faults", headers=sim.admin_headers).raise_for_status()
        _connect_s, tls_s = connect_and_handshake(sim)
        assert tls_s < 0.5
