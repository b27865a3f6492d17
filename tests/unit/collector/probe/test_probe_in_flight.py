"""A probe is in the fast guard's in-flight table only once its request is sent (docs/slo.md, "The
evidence contract"): connecting and the TLS handshake are the prober's own time, as a client's
upload is, never a wait on the lane's first token."""

from __future__ import annotations

import asyncio
import time

from lanewatch.collector.probe.prober import Prober, ProbeSpec
from lanewatch.collector.probe.settings import Target, Timeouts
from lanewatch.collector.progress.inflight import InFlight, Progress
from lanewatch.collector.record.timing import ErrorKind

HOLD_S = 0.8  # the server sits on the TLS handshake this long, then hangs up


async def test_a_probe_still_in_its_handshake_is_not_waiting_on_the_lane() -> None:
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(HOLD_S)
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    table = InFlight()
    events: list[Progress] = []
    target = Target(
        name="t", url=f"https://127.0.0.1:{port}", lane="fast", model="m", scrape=False, insecure=True
    )
    try:
        async with Prober(target, in_flight=table, timeouts=Timeouts(connect_s=5.0)) as prober:
            probing = asyncio.create_task(prober.probe(ProbeSpec("short", "chat", 2)))
            while not probing.done():
                events += table.report(time.perf_counter())
                await asyncio.sleep(0.02)
            record = await probing
            events += table.report(time.perf_counter())
    finally:
        server.close()
        await server.wait_closed()
    assert record.error in (ErrorKind.TLS, ErrorKind.CONNECT), record
    assert record.e2e_s is not None and record.e2e_s >= HOLD_S * 0.9  # it did wait out the handshake
    assert events == []  # ... and never in the table: nothing was sent to the lane
