"""The progress reporter the gateway and the LiteLLM handler share, against a collector that is down
or answers: it counts what it lost, keeps one report in the air, and never holds up its loop."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from lanewatch.collector.progress.inflight import InFlight
from lanewatch.collector.progress.report import ProgressReporter
from lanewatch.collector.progress.wire import parse_progress
from tests.servers import closed_port, serve_app

INTERVAL_S = 0.05


async def _lag_while(seconds: float) -> float:
    """The longest the loop was late for a 10 ms tick over `seconds`."""
    worst, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        before = time.monotonic()
        await asyncio.sleep(0.01)
        worst = max(worst, time.monotonic() - before - 0.01)
    return worst


async def test_a_collector_that_is_down_costs_lost_reports_not_the_loop() -> None:
    table = InFlight()
    table.start("fast", time.perf_counter(), lambda: None)
    reporter = ProgressReporter(
        table, f"http://127.0.0.1:{closed_port()}", "t", INTERVAL_S, 5.0, prefix="litellm"
    )
    reporter.start()
    assert reporter.running
    try:
        lag = await _lag_while(0.6)
    finally:
        await reporter.shutdown()
    assert not reporter.running
    assert reporter.sent == 0 and reporter.lost >= 3  # one event a report, every report lost
    assert lag < 0.25, lag  # generous: a loaded 2-core machine; a blocking send would be its timeout


async def test_reports_carry_the_prefix_and_the_token_and_are_counted() -> None:
    seen: list[tuple[str, str | None]] = []
    two = asyncio.Event()

    async def progress(request: web.Request) -> web.Response:
        report = parse_progress(await request.read())
        seen.append((report.reporter, request.headers.get("Authorization")))
        if len(seen) >= 2:
            two.set()
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/v1/progress", progress)
    runner, url = await serve_app(app)
    table = InFlight()
    table.start("fast", time.perf_counter(), lambda: None)
    reporter = ProgressReporter(table, url, "tok", INTERVAL_S, 5.0, prefix="litellm-eu")
    reporter.start()
    try:
        await asyncio.wait_for(two.wait(), 10)
    finally:
        await reporter.shutdown()
        await runner.cleanup()
    assert all(r.startswith("litellm-eu-") and auth == "Bearer tok" for r, auth in seen), seen
    assert reporter.sent >= 2 and reporter.lost == 0
