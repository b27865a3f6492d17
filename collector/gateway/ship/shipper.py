"""Ships the tap's records to the collector's `POST /v1/records` from a background task.

The data path's whole cost is `append`: one deque append (and, once per batch, waking the
task). Everything else runs in the task: batches by count, size or time, encoded a few
records per loop turn so no stream waits long behind it; a failed send puts the records
back and backs off; a full queue drops the oldest. `close` sends what is left, within
`shutdown_s`. The collector joins the records to vLLM's spans and exports them.
The collector takes a batch's good records and names the ones it refused (200 with
`refused_count`): those count as dropped `refused`, the rest as shipped. A record built here
has passed the same checks the collector makes (RequestTiming's own), so that stays at zero
unless the two run different versions. Each record goes with a `record_id`, a digest of its
own JSON (record/batch.py): a batch sent again after an answer was lost names its records as
before, and the collector acknowledges those it took already without taking them twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.config import ShippingConfig
from lanewatch.collector.record.batch import encode_batch, encode_record
from lanewatch.collector.record.timing import RequestTiming

from .policy import backoff_s, due, refused_in, requeue, take, verdict

__all__ = ["HttpPost", "Post", "RecordShipper", "ShipStats"]

log = logging.getLogger("lanewatch.gateway.ship")
RECORDS_PATH = "/v1/records"  # the collector's (collector/collect/records_http.py)
_MAX_ANSWER_BYTES = 64 * 1024  # the collector lists at most 100 refused records
_ENCODE_SLICE = 8  # records encoded between loop turns: ~0.2 ms of JSON at a time


class Post(Protocol):
    """Sends one batch body; the HTTP status and body, or (None, b"") when no answer came."""

    async def __call__(self, body: bytes) -> tuple[int | None, bytes]: ...

    async def close(self) -> None:
        """Release connections."""


@dataclass(slots=True)
class ShipStats:
    """Counters since start; the queue length is read live."""

    shipped: int = 0  # records the collector accepted
    send_failures: int = 0  # sends that got no answer or a status worth retrying
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> records
    queue: deque[RequestTiming] = field(default_factory=deque)
    sending: int = 0  # records of the batch on its way

    @property
    def queued(self) -> int:
        """Records not yet shipped: waiting, and on their way."""
        return len(self.queue) + self.sending


class RecordShipper:
    """A bounded queue of records and the task that sends it in batches."""

    def __init__(self, cfg: ShippingConfig, post: Post, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self._post = post
        self._clock = clock
        self._queue: deque[RequestTiming] = deque(maxlen=cfg.queue_records)
        self._max = cfg.queue_records
        self._batch = cfg.batch_records
        self.stats = ShipStats(queue=self._queue)
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._last_send = clock()
        self._failing = False

    def append(self, record: RequestTiming) -> None:
        """Queue a record (the data path's sink): never waits, drops the oldest when full."""
        q = self._queue
        if len(q) == self._max:
            self.stats.dropped["queue_full"] += 1
        q.append(record)
        if len(q) == self._batch:
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
        while self._queue and self._clock() < deadline:
            left = deadline - self._clock()
            try:
                async with asyncio.timeout(left):
                    ok = await self._send_batch()
            except TimeoutError:
                ok = False
            if not ok:
                break
        if self._queue:
            self.stats.dropped["shutdown"] += len(self._queue)
            log.warning("dropped %d records the collector did not take before exit", len(self._queue))
            self._queue.clear()
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
            if due(len(self._queue), waited, cfg.batch_records, cfg.interval_s):
                return
            if not self._queue and waited >= cfg.interval_s:
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
        batch, bodies = await self._encode(take(self._queue, self._batch))
        if not batch:
            return True
        self._last_send = self._clock()
        self.stats.sending = len(batch)
        try:
            status, answer = await self._post(encode_batch(bodies))
        finally:
            self.stats.sending = 0
        outcome = verdict(status)
        if outcome == "sent":
            refused, why = refused_in(answer, len(batch))
            if refused:
                self.stats.dropped["refused"] += refused
                log.error("the collector refused %d of %d records (%s); dropped", refused, len(batch), why)
            self.stats.shipped += len(batch) - refused
            if self._failing:
                log.info("the collector takes records again")
                self._failing = False
            return True
        if outcome == "rejected":
            self.stats.dropped["rejected"] += len(batch)
            log.error("the collector rejected %d records with HTTP %s; dropped", len(batch), status)
            return True
        self.stats.send_failures += 1
        if not self._failing:
            log.warning(
                "cannot ship records to the collector (%s); retrying with backoff", status or "no answer"
            )
            self._failing = True
        self.stats.dropped["queue_full"] += requeue(self._queue, batch)
        return False

    async def _encode(self, records: list[RequestTiming]) -> tuple[list[RequestTiming], list[bytes]]:
        """Encode a batch, a slice per loop turn; what passes `batch_bytes` goes back to the queue."""
        batch: list[RequestTiming] = []
        bodies: list[bytes] = []
        size = 0
        for i, record in enumerate(records):
            if i and i % _ENCODE_SLICE == 0:
                await asyncio.sleep(0)
            try:
                body = encode_record(record, with_id=True)
            except ValueError:  # a NaN or infinity: the collector would refuse the whole batch
                self.stats.dropped["unencodable"] += 1
                continue
            if batch and size + len(body) > self.cfg.batch_bytes:
                self.stats.dropped["queue_full"] += requeue(self._queue, records[i:])
                break
            batch.append(record)
            bodies.append(body)
            size += len(body) + 1
        return batch, bodies


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
