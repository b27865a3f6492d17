"""Ships the tap's records to the collector's `POST /v1/records` from a background task.

The data path's whole cost is `append`: one deque append (and, once per batch, waking the
task). Everything else runs in the task: batches by count, size or time, encoded a few
records per loop turn so no stream waits long behind it; a failed send puts the records
back and backs off; a full queue drops the oldest. `close` sends what is left, within
`shutdown_s`. The collector joins the records to vLLM's spans and exports them.
What a batch holds and what each answer means (a refused record, a retry, a rejection) is the
one core every record sender runs (collector/record/shipping.py). A record built here has
passed the same checks the collector makes (RequestTiming's own), so the collector's refusals
stay at zero unless the two run different versions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Protocol

import aiohttp

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.gateway.settings import ShippingConfig
from lanewatch.collector.record.shipping import RECORDS_PATH, ShipQueue, ShipStats, backoff_s, due
from lanewatch.collector.record.timing import RequestTiming

__all__ = ["HttpPost", "Post", "RecordShipper", "ShipStats"]

log = logging.getLogger("lanewatch.gateway.ship")
_MAX_ANSWER_BYTES = 64 * 1024  # the collector lists at most 100 refused records


class Post(Protocol):
    """Sends one batch body; the HTTP status and body, or (None, b"") when no answer came."""

    async def __call__(self, body: bytes) -> tuple[int | None, bytes]: ...

    async def close(self) -> None:
        """Release connections."""


class RecordShipper:
    """A bounded queue of records (record/shipping.py) and the task that sends it in batches."""

    def __init__(self, cfg: ShippingConfig, post: Post, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self._post = post
        self._clock = clock
        self._ship = ShipQueue(cfg.queue_records, cfg.batch_records, cfg.batch_bytes)
        self.stats = self._ship.stats
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._last_send = clock()
        self._failing = False

    def append(self, record: RequestTiming) -> None:
        """Queue a record (the data path's sink): never waits, drops the oldest when full."""
        if self._ship.append(record):
            self._wake.set()

    def start(self) -> None:
        """Start the sending task on the running loop."""
        self._last_send = self._clock()
        self._task = asyncio.create_task(self._run(), name="record-shipper")

    async def shutdown(self) -> None:
        """Stop the task, then send what is queued within `shutdown_s`; the rest counts as dropped."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        deadline = self._clock() + self.cfg.shutdown_s
        while self._ship and self._clock() < deadline:
            left = deadline - self._clock()
            try:
                async with asyncio.timeout(left):
                    ok = await self._send_batch()
            except TimeoutError:
                ok = False
            if not ok:
                break
        if dropped := self._ship.drain("shutdown"):
            log.warning("dropped %d records the collector did not take before exit", dropped)
        await self._post.close()

    async def _run(self) -> None:
        failures = 0
        while not self._closing:
            await self._until_due()
            if self._closing:
                return
            try:
                ok = await self._send_batch()
            except Exception:  # a bug here must not end shipping for good
                log.exception("shipping a batch failed")
                ok = False
            failures = 0 if ok else failures + 1
            if failures:
                await self._pause(backoff_s(failures, self.cfg.retry_initial_s, self.cfg.retry_max_s))

    async def _until_due(self) -> None:
        cfg = self.cfg
        while not self._closing:
            now = self._clock()
            waited = now - self._last_send
            if due(len(self._ship), waited, cfg.batch_records, cfg.interval_s):
                return
            if not self._ship and waited >= cfg.interval_s:
                self._last_send, waited = now, 0.0  # idle: the next record waits one interval at most
            self._wake.clear()
            await self._pause(cfg.interval_s - waited)

    async def _pause(self, seconds: float) -> None:
        """Sleep, woken early by a full batch or by close."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    async def _send_batch(self) -> bool:
        """Send one batch of the oldest records; False when it must be tried again later."""
        ship = self._ship
        batch = None
        for step in ship.encode(ship.take()):
            if step is None:
                await asyncio.sleep(0)  # a slice at a time: no stream waits long behind the encoding
            else:
                batch = step
        assert batch is not None  # encode always ends with the batch
        ship.put_back(batch.left)
        if not batch.records:
            return True
        self._last_send = self._clock()
        self.stats.sending = len(batch.records)
        try:
            status, answer = await self._post(batch.body())
        finally:
            self.stats.sending = 0
        outcome = ship.settle(batch, status, answer)
        n = len(batch.records)
        if outcome.verdict == "sent":
            if outcome.refused:
                log.error(
                    "the collector refused %d of %d records (%s); dropped", outcome.refused, n, outcome.why
                )
            if self._failing:
                log.info("the collector takes records again")
                self._failing = False
            return True
        if outcome.verdict == "rejected":
            log.error("the collector rejected %d records with HTTP %s; dropped", n, status)
            return True
        if not self._failing:
            log.warning(
                "cannot ship records to the collector (%s); retrying with backoff", status or "no answer"
            )
            self._failing = True
        return False


class HttpPost:
    """POSTs batches to a collector with aiohttp; one session, opened on first use."""

    def __init__(self, collector_url: str, token: str | None, timeout_s: float) -> None:
        self.url = collector_url.rstrip("/") + RECORDS_PATH
        self._headers = {"Content-Type": "application/json"}
        if token is not None:
            self._headers[AUTHORIZATION] = f"Bearer {token}"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __call__(self, body: bytes) -> tuple[int | None, bytes]:
        """Send one batch; its status and answer, or (None, b"") without an answer."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.post(self.url, data=body, headers=self._headers) as resp:
                answer = await resp.content.read(_MAX_ANSWER_BYTES)
                return resp.status, answer
        except (aiohttp.ClientError, TimeoutError, OSError):
            return None, b""

    async def close(self) -> None:
        """Close the session."""
        if self._session is not None:
            await self._session.close()
            self._session = None
