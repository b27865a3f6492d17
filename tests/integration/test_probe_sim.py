"""The prober against `lanewatch sim`: accuracy against ground truth, connections, faults.

Tight figures (TTFT error p99 within 2 ms, curl agreement within 2 ms) are measured by
bench/probe_accuracy.py over many samples; these tests assert the same behaviour with
margins a loaded 2-core CI machine cannot break.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
from typing import Any

import pytest

from lanewatch.collector.probe.prober import Prober, ProbeSpec
from lanewatch.collector.probe.settings import Target, Timeouts
from lanewatch.collector.record.timing import ErrorKind, RequestTiming, breakdown
from tests.conftest import require_binary
from tests.servers import SimHandle, closed_port, wait_listening

pytestmark = [pytest.mark.integration, pytest.mark.serial]


def localhost(sim: SimHandle) -> str:
    """The sim's URL by host name, so every cold connection resolves a name."""
    return sim.url.replace("127.0.0.1", "localhost")


def spec(i: int, max_tokens: int = 6) -> ProbeSpec:
    return ProbeSpec("short", "chat", max_tokens, prompt=f"probe {i}: how are you?")


def truths(sim: SimHandle, records: list[RequestTiming]) -> list[dict[str, Any]]:
    with sim.client() as c:
        return [c.get(f"/debug/requests/{r.request_id}").json() for r in records]


async def test_ttft_and_tokens_match_ground_truth_over_200_probes(sim: SimHandle) -> None:
    async with Prober(Target(name="sim", url=sim.url, model=sim.model)) as p:
        records = [await p.probe(spec(i)) for i in range(200)]
    assert all(r.ok for r in records), {r.error for r in records}
    truth = truths(sim, records)
    assert [r.output_tokens for r in records] == [t["output_tokens"] for t in truth]
    assert [r.prompt_tokens for r in records] == [t["prompt_tokens"] for t in truth]
    assert all(r.tokens_from_usage for r in records)
    assert [r.trace_id for r in records] == [t["trace_id"] for t in truth]
    errors = sorted(
        (r.ttft_s or 0) - ((r.dns_s or 0) + (r.connect_s or 0) + (r.tls_s or 0)) - t["ttft_s"]
        for r, t in zip(records, truth, strict=True)
    )
    # The client's window holds the server's, so errors are positive but for the sim's own
    # timing slack; taking TTFB (headers, sent at arrival) for TTFT would make them < -2 ms.
    assert errors[int(0.05 * len(errors))] > -0.001, errors[:10]
    # ~0.7-1.3 ms when the machine is ours (bench/probe_accuracy.py); 3 ms seen with five
    # times more work than cores. Timing the stream's end instead would be ~12 ms off.
    assert statistics.median(errors) < 0.005, statistics.median(errors)
    assert errors[int(0.9 * len(errors))] < 0.020
    for r in records:
        assert r.e2e_s is not None
        assert abs(sum(breakdown(r).values()) - r.e2e_s) < 0.001
        assert len(r.itl_s) == (r.output_tokens or 0) - 1


async def test_cold_probes_measure_dns_connect_tls_and_warm_ones_reuse(tls_sim: SimHandle) -> None:
    t = Target(name="sim", url=localhost(tls_sim), model=tls_sim.model, cacert=tls_sim.cert_path)
    async with Prober(t, connection="cold") as p:
        cold = [await p.probe(spec(i, 1)) for i in range(5)]
    async with Prober(t, connection="warm") as p:
        warm = [await p.probe(spec(i, 1)) for i in range(5)]
    assert all(r.ok for r in cold + warm), [r.error for r in cold + warm]
    for r in [*cold, warm[0]]:
        assert r.dns_s and r.connect_s and r.tls_s, r
        assert r.dns_s > 0 and r.connect_s > 0 and r.tls_s > 0
    for r in warm[1:]:
        assert (r.dns_s, r.connect_s, r.tls_s) == (0.0, 0.0, 0.0)


def curl_times(url: str, cacert: str, n: int) -> list[tuple[float, float]]:
    """(connect, TLS) per transfer from one curl run of n fresh connections (no TLS resumption)."""
    fmt = "%{time_namelookup} %{time_connect} %{time_appconnect}\\n"
    args = ["curl", "-s", "--cacert", cacert, "--no-sessionid", "-H", "Connection: close", "-w", fmt]
    for _ in range(n):
        args += [f"{url}/health", "-o", "/dev/null"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=30, check=True).stdout
    rows = [[float(x) for x in line.split()] for line in out.splitlines() if line.strip()]
    # The first transfer of a curl run also loads the CA file and builds OpenSSL's
    # context inside its "TLS" time; later transfers reuse them, as our prober does.
    return [(c - nl, a - c) for nl, c, a in rows[1:]]


async def test_connect_and_tls_times_agree_with_curl(tls_sim: SimHandle) -> None:
    require_binary("curl")
    url, ca = localhost(tls_sim), str(tls_sim.cert_path)
    t = Target(name="sim", url=url, model=tls_sim.model, cacert=tls_sim.cert_path)
    ours: list[RequestTiming] = []
    theirs: list[tuple[float, float]] = []
    async with Prober(t, connection="cold") as p:
        for i in range(4):  # interleaved rounds, so both see the same machine load
            theirs += await asyncio.to_thread(curl_times, url, ca, 6)
            ours += [await p.probe(spec(i, 1)) for _ in range(5)]
    assert all(r.ok for r in ours)
    # Compared at the fastest handshake of each: the one the load left alone. A handshake is
    # CPU work in this process, curl's and the simulator's, and on a loaded host the medians
    # of both swing between ~1.5 and ~5 ms by who was preempted in its middle (2 of 8 runs
    # failed a 3 ms bound under 8 busy loops); the fastest moves only when a phase is measured
    # wrong (the connect or the request counted in another phase, a context built inside TLS).
    fastest = [
        min(xs)
        for xs in (
            [r.connect_s or 0 for r in ours],
            [c for c, _ in theirs],
            [r.tls_s or 0 for r in ours],
            [s for _, s in theirs],
        )
    ]
    connect, tls = fastest[0] - fastest[1], fastest[2] - fastest[3]
    assert abs(connect) < 0.003, (connect, tls, fastest)
    assert abs(tls) < 0.003, (connect, tls, fastest)


GENEROUS = Timeouts(connect_s=2.0, ttft_s=5.0, stall_s=5.0, total_s=10.0)
# Each fault with limits that it trips and that a loaded machine cannot trip by itself.
FAULTS: dict[str, tuple[dict[str, Any], ErrorKind, Timeouts]] = {
    "429": ({"error_rates": {"429": 1.0}}, ErrorKind.HTTP_429, GENEROUS),
    "500": ({"error_rates": {"500": 1.0}}, ErrorKind.HTTP_5XX, GENEROUS),
    "503": ({"error_rates": {"503": 1.0}}, ErrorKind.HTTP_5XX, GENEROUS),
    "truncated": ({"truncate_after_tokens": 2}, ErrorKind.TRUNCATED, GENEROUS),
    "malformed": ({"malformed_after_tokens": 1}, ErrorKind.BAD_STREAM, GENEROUS),
    "stall": ({"stall_s": 1.5, "stall_after_tokens": 1}, ErrorKind.STALL, Timeouts(stall_s=0.3, total_s=10)),
    "queue delay": ({"queue_delay_s": 1.5}, ErrorKind.TTFT_TIMEOUT, Timeouts(ttft_s=0.3)),
    "prefill slowdown": ({"prefill_slowdown": 400.0}, ErrorKind.TTFT_TIMEOUT, Timeouts(ttft_s=0.3)),
    # Every gap ~0.1 s, far under the stall limit; eight of them run past the total limit.
    "decode slowdown": ({"decode_slowdown": 40.0}, ErrorKind.TIMEOUT, Timeouts(stall_s=2.0, total_s=0.45)),
    "refused connections": ({"refuse_connections_s": 1.0}, ErrorKind.CONNECT_REFUSED, GENEROUS),
}


def set_faults(sim: SimHandle, body: dict[str, Any] | None) -> None:
    with sim.client(headers=sim.admin_headers) as c:
        r = c.post("/admin/faults", json=body) if body is not None else c.delete("/admin/faults")
    r.raise_for_status()


@pytest.mark.parametrize("name", list(FAULTS))
async def test_every_simulator_fault_is_its_error_kind_and_probing_goes_on(sim: SimHandle, name: str) -> None:
    body, kind, limits = FAULTS[name]
    t = Target(name="sim", url=sim.url, model=sim.model)
    async with Prober(t, connection="cold", timeouts=limits) as p:
        set_faults(sim, body)
        try:
            faulty = await p.probe(spec(0, 8))
        finally:
            if name == "refused connections":
                await asyncio.to_thread(wait_listening, sim.url, 1.0)  # new connections work again after 1 s
            set_faults(sim, None)
        # The same prober goes on; the sim may still be finishing the slowed request.
        after = await p.probe(spec(1, 8), timeouts=GENEROUS)
    assert faulty.error is kind, (faulty.error, faulty.status)
    assert after.ok, after.error


async def test_untrusted_certificate_is_tls_and_nothing_listening_is_refused(tls_sim: SimHandle) -> None:
    untrusted = Target(name="sim", url=localhost(tls_sim), model=tls_sim.model)
    async with Prober(untrusted) as p:
        assert (await p.probe(spec(0))).error is ErrorKind.TLS
    gone = Target(name="gone", url=f"http://localhost:{closed_port()}", model="m")
    async with Prober(gone) as p:
        assert (await p.probe(spec(0))).error is ErrorKind.CONNECT_REFUSED
    nowhere = Target(name="nowhere", url="http://no-such-host.invalid", model="m")
    async with Prober(nowhere, timeouts=Timeouts(connect_s=3.0)) as p:
        assert (await p.probe(spec(0))).error is ErrorKind.DNS
