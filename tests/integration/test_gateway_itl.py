"""ITL fidelity through `lanewatch gateway` (a subprocess) over 50 concurrent streams.

ITL is measured at both ends: when the upstream (tests/sse_upstream.py, another process)
wrote each content chunk, and when a lean raw-socket client received it. On a shared
2-core machine the processes' scheduling alone moves single gaps by several ms, and a
stall of this client by its whole length, so the bounds are taken side by side in the
same run: 50 more streams straight from the upstream
at the same moments show what the client and the load cost without the gateway, and the
upstream's own lateness against its 50 ms shows how late a process here wakes. Holding
chunks back costs whole gaps, far past either. The tight figures, each chunk's added delay
at p50 and p99 against nginx and a direct connection, are measured in bench/tap_overhead.py
(bench/results.md).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from pathlib import Path

import aiohttp
import pytest

from lanewatch.collector.record.window import summarize

from .gateway_harness import chat_body, start_gateway, start_test_upstream

pytestmark = [pytest.mark.integration, pytest.mark.serial]
STREAMS, CHUNKS, GAP_MS = 50, 20, 50
MARK = b'"content":"t'


class _Reader(asyncio.Protocol):
    """Stamps the arrival of each content chunk; parses nothing else."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.times: list[float] = []
        self.done = done

    def data_received(self, data: bytes) -> None:
        n = data.count(MARK)
        if n:
            self.times += [time.monotonic()] * n
        if b"data: [DONE]" in data and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _stream(port: int, rid: str) -> list[float]:
    await asyncio.sleep(random.random() * GAP_MS / 1000)  # spread the streams' phases
    body = json.dumps(chat_body(CHUNKS)).encode()
    head = "\r\n".join(
        [
            "POST /v1/chat/completions HTTP/1.1",
            "Host: gw",
            "Content-Type: application/json",
            f"x-request-id: {rid}",
        ]
    )
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    transport, reader = await loop.create_connection(lambda: _Reader(done), "127.0.0.1", port)
    transport.write(f"{head}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    await asyncio.wait_for(done, 10)
    transport.close()
    return reader.times


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def _errors(
    received: list[list[float]], written: list[list[float]]
) -> tuple[list[float], list[float], list[float]]:
    """Downstream gaps, upstream gaps and |down - up| per gap, over all streams."""
    down, upstream, errors = [], [], []
    for got, wrote in zip(received, written, strict=True):
        assert len(got) == len(wrote) == CHUNKS
        d, u = _gaps(got), _gaps(wrote)
        down += d
        upstream += u
        errors += [abs(a - b) for a, b in zip(d, u, strict=True)]
    return down, upstream, errors


async def test_itl_through_the_gateway_matches_upstream_over_50_streams(tmp_path: Path) -> None:
    with (
        start_test_upstream(tmp_path, first_ms=20, gap_ms=GAP_MS) as up,
        start_gateway(tmp_path, [f"slow={up}"]) as gw,
    ):
        gw_port, up_port = int(gw.url.rsplit(":", 1)[1]), int(up.rsplit(":", 1)[1])
        tag = random.getrandbits(32)
        via = [f"itl-{i}-{tag}" for i in range(STREAMS)]
        direct = [f"direct-{i}-{tag}" for i in range(STREAMS)]
        # The same streams straight from the upstream, at the same moments: what this client,
        # the upstream and the machine's load cost by themselves, the yardstick for the gateway.
        received = await asyncio.gather(
            *(_stream(gw_port, rid) for rid in via), *(_stream(up_port, rid) for rid in direct)
        )
        async with aiohttp.ClientSession() as s:
            written = []
            for rid in via + direct:
                async with s.get(f"{up}/debug/requests/{rid}") as r:
                    written.append((await r.json())["writes"])
    down, upstream, errors = _errors(received[:STREAMS], written[:STREAMS])
    direct_down, _, direct_errors = _errors(received[STREAMS:], written[STREAMS:])
    err, d_sum, u_sum = summarize(errors), summarize(down), summarize(upstream)
    base = summarize(direct_errors)
    # How late a process here wakes at these moments: the upstream's gaps against its 50 ms.
    late = summarize(abs(u - GAP_MS / 1000) for u in upstream)
    assert err is not None and d_sum is not None and u_sum is not None and base is not None
    assert late is not None
    print(
        f"ITL over {len(errors)} gaps: |down - up| p50 {err.p50 * 1e3:.2f} p95 {err.p95 * 1e3:.2f} "
        f"p99 {err.p99 * 1e3:.2f} ms; direct p50 {base.p50 * 1e3:.2f} p95 {base.p95 * 1e3:.2f} ms; "
        f"upstream lateness p50 {late.p50 * 1e3:.2f} p95 {late.p95 * 1e3:.2f} ms; "
        f"p99 down {d_sum.p99 * 1e3:.2f} vs up {u_sum.p99 * 1e3:.2f} ms"
    )
    # Through the gateway is the direct path plus one process hop, whose wake-ups are as late
    # as the upstream's: twice both, plus 1 ms (p50) and 10 ms (p95), is a margin that load
    # moves with; holding chunks back would cost whole 50 ms gaps.
    assert err.p50 <= 2 * (base.p50 + late.p50) + 0.001
    assert err.p95 <= 2 * (base.p95 + late.p95) + 0.010
    assert abs(d_sum.p50 - u_sum.p50) <= 0.001 + late.p50
    # Chunks kept apart, not held and sent together: no more gaps under half the upstream's
    # than the direct streams show (a stall of this client bunches both alike), give or take 5%.
    short = GAP_MS / 2000
    assert sum(d < short for d in down) <= sum(d < short for d in direct_down) + len(down) // 20
