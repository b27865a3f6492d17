"""A router that trickles its answer, one header byte every 1.5 s, beside a healthy one.

A real HTTP server on 127.0.0.1 reads the webhook's request whole, then sends its answer's head
a byte at a time and never finishes. That defeats a per-read timeout, so only a total deadline
ends the call: the webhook's own (`timeout_s`, per call), and the controller's per-adapter one
(`apply_timeout_s`). The healthy router must get each new state at once, and the slow one's
failure must be audited, counted and retried, never holding the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from lanewatch.collector.degrade.adapters import AdapterError, DryRunAdapter, Retry, WebhookAdapter
from lanewatch.collector.degrade.metrics import DegradeMetrics
from lanewatch.collector.degrade.policy import DEFAULT_POLICY
from lanewatch.collector.degrade.service import DegradeService
from lanewatch.collector.degrade.state import LaneSpec
from lanewatch.collector.degrade.store import Store
from lanewatch.collector.degrade.webhook import parse_notification
from lanewatch.exporters import names
from tests.alertmanager_bodies import alert, body, encode
from tests.waiting import eventually_async

pytestmark = pytest.mark.integration

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 4096


@dataclass
class Trickler:
    """What the trickling server was sent: each request's revision, when it arrived."""

    url: str = ""
    every_s: float = 1.5
    revisions: list[tuple[float, int]] = field(default_factory=list)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    handlers: list[asyncio.Task[None]] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            sent = json.loads(await reader.readexactly(length))
            self.revisions.append((time.monotonic(), int(sent["revision"])))
            for byte in HEAD:  # never a whole head: the answer never ends
                writer.write(bytes([byte]))
                await writer.drain()
                with contextlib.suppress(TimeoutError):  # ends with the server, not cancelled
                    await asyncio.wait_for(self.closing.wait(), self.every_s)
                if self.closing.is_set():
                    break
        writer.close()


@contextlib.asynccontextmanager
async def trickling(every_s: float = 1.5) -> AsyncIterator[Trickler]:
    """A server on 127.0.0.1 that answers each request one header byte every `every_s`."""
    trickler = Trickler(every_s=every_s)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        trickler.handlers.append(task)
        await trickler.serve(reader, writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    trickler.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/degrade"
    try:
        yield trickler
    finally:
        trickler.closing.set()
        server.close()
        await asyncio.gather(*trickler.handlers, return_exceptions=True)
        await server.wait_closed()


async def test_the_webhooks_call_has_a_total_deadline_a_trickled_answer_cannot_stretch() -> None:
    async with trickling(every_s=0.5) as hook:  # a byte well within each read's 1 s
        adapter = WebhookAdapter(hook.url, None, name="hook", timeout_s=1.0, retry=Retry(attempts=1))
        started = time.monotonic()
        with pytest.raises(AdapterError, match="no whole answer within 1 s") as caught:
            await asyncio.wait_for(adapter.apply({}, 1), 20)
        took = time.monotonic() - started
        await adapter.shutdown()
    assert caught.value.retryable
    assert took < 1.0 + 3.0, took  # its deadline and slack for a loaded machine, not the 20 s guard


async def test_a_router_that_trickles_its_answer_holds_back_only_itself(tmp_path: Path) -> None:
    deadline_s = 2.0
    async with trickling() as hook:
        # The webhook's own timeout far off: the controller's deadline is what must end the apply.
        slow = WebhookAdapter(hook.url, None, name="hook", timeout_s=60, retry=Retry(attempts=1))
        healthy = DryRunAdapter("healthy")
        store = Store(tmp_path / "state")
        registry = CollectorRegistry()
        metrics = DegradeMetrics(registry, ["healthy", "hook"])
        service = DegradeService(DEFAULT_POLICY, store, [healthy, slow], metrics, apply_timeout_s=deadline_s)
        stop = asyncio.Event()
        driver = asyncio.create_task(service.run(stop, tick_s=0.05, reconcile_s=60))
        try:
            # The first reconcile's apply to the hook is under way and hanging.
            await eventually_async(lambda: hook.revisions, 10, "the hook's first request")
            first_at = hook.revisions[0][0]

            fired = time.monotonic()
            notification = parse_notification(encode(body(alert("firing", starts=time.time() - 1))))
            handled = await service.handle(notification)
            assert handled.changed and handled.revision == 1

            async def holds_the_shift() -> bool:
                view = await healthy.read_back()
                return view.lanes == {"slow": LaneSpec("fast", 50)} and view.revision == 1

            while not await holds_the_shift():
                assert time.monotonic() - fired < 10, "the healthy router never got the shift"
                await asyncio.sleep(0.01)
            healthy_s = time.monotonic() - fired
            assert healthy_s < 1.0, healthy_s  # at once, not after the hook's deadline

            def failed() -> list[dict[str, object]]:
                return [e.detail for _, _, e in store.recent(20) if e.event == "adapter_failed"]

            [entry] = await eventually_async(failed, deadline_s + 5, "the hook's adapter_failed entry")
            failed_s = time.monotonic() - first_at
            assert entry["adapter"] == "hook" and entry["reason"] == "timeout", entry
            assert entry["error"] == "no answer within 2 s", entry
            assert failed_s < deadline_s + 3.0, failed_s
            count = registry.get_sample_value(
                names.DEGRADE_ADAPTER_FAILURES_TOTAL, {"adapter": "hook", "reason": "timeout"}
            )
            assert count is not None and count >= 1
            assert registry.get_sample_value(names.DEGRADE_ADAPTER_SYNCED, {"adapter": "healthy"}) == 1.0
            assert registry.get_sample_value(names.DEGRADE_ADAPTER_SYNCED, {"adapter": "hook"}) == 0.0

            # Retried, with the newest state, and never two applies to it at once.
            await eventually_async(
                lambda: [r for _, r in hook.revisions[1:] if r == 1],
                2 * deadline_s + 5,
                "a retry to the hook",
            )
            assert [r for _, r in hook.revisions] == sorted(r for _, r in hook.revisions)
            starts = [at for at, _ in hook.revisions]
            gaps = [b - a for a, b in itertools.pairwise(starts)]
            assert all(gap >= deadline_s * 0.9 for gap in gaps), gaps  # one at a time, each to its deadline
        finally:
            stop.set()
            await asyncio.wait_for(driver, 10)
            await service.shutdown()
    print(
        f"healthy router's apply {healthy_s * 1000:.1f} ms after the decision; hook failed {failed_s:.2f} s"
    )
