"""Ships records to the collector's `POST /v1/records` from a thread of its own (the stdlib's HTTP client).

The host's side is `append`: one deque append under a lock held for a few instructions, so the
proxy's event loop never waits on the network or on this module. A daemon thread sends batches by
count or every `interval_s`, with the ingest token as a bearer token. What a batch holds and what
each answer means is the one core every record sender runs (collector/record/shipping.py): a full
queue drops the oldest record; a send with no answer (or 408, 425, 429, 5xx) puts the batch back
and backs off; any other refusal drops the batch; each drop is counted by reason in `stats`.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from lanewatch.collector.record.shipping import (
    DEFAULT_BATCH_BYTES,
    RECORDS_PATH,
    ShipQueue,
    ShipStats,
    backoff_s,
)
from lanewatch.collector.record.timing import RequestTiming

__all__ = ["RECORDS_PATH", "Post", "RecordShipper", "ShipStats", "urllib_post"]

log = logging.getLogger("lanewatch.litellm.ship")
_MAX_ANSWER_BYTES = 64 * 1024

# (url, body, headers, timeout_s) -> (status, answer); (None, b"") when no answer came
Post = Callable[[str, bytes, dict[str, str], float], tuple[int | None, bytes]]


def urllib_post(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> tuple[int | None, bytes]:
    """POST with the standard library; the status and answer, or (None, b"") without an answer."""
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return int(resp.status), resp.read(_MAX_ANSWER_BYTES)
    except urllib.error.HTTPError as e:
        return int(e.code), e.read(_MAX_ANSWER_BYTES)
    except (OSError, ValueError):  # refused, reset, timed out (URLError is an OSError)
        return None, b""


class RecordShipper:
    """A bounded queue of records and the thread that sends it in batches."""

    def __init__(
        self,
        collector_url: str,
        token: str | None,
        queue_records: int = 10_000,
        batch_records: int = 200,
        interval_s: float = 1.0,
        timeout_s: float = 5.0,
        retry_max_s: float = 30.0,
        post: Post = urllib_post,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        retry_initial_s: float = 0.5,
    ) -> None:
        self.url = collector_url.rstrip("/") + RECORDS_PATH
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._ship = ShipQueue(queue_records, batch_records, batch_bytes)
        self.stats = self._ship.stats
        self._interval, self._timeout = interval_s, timeout_s
        self._retry_initial, self._retry_max = retry_initial_s, retry_max_s
        self._post = post
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None

    @property
    def queued(self) -> int:
        """Records waiting to be sent."""
        return len(self._ship)

    def append(self, record: RequestTiming) -> None:
        """Queue a record: never waits; drops the oldest when full; starts the thread on first use."""
        with self._lock:
            full = self._ship.append(record)
            if self._thread is None and not self._closing:
                self._thread = threading.Thread(target=self._run, name="lanewatch-ship", daemon=True)
                self._thread.start()
        if full:
            self._wake.set()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the thread after one last send of what is queued (within `timeout_s`)."""
        self._closing = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        with self._lock:
            self._ship.drain("shutdown")

    def send_once(self) -> bool:
        """Send one batch of the oldest records; False when it must be tried again later."""
        ship = self._ship
        with self._lock:
            records = ship.take()
        batch = None
        for step in ship.encode(records):  # outside the lock: the host appends meanwhile
            if step is None:
                time.sleep(0)  # encoding holds the GIL: hand it to the proxy's threads now and then
            else:
                batch = step
        assert batch is not None  # encode always ends with the batch
        with self._lock:
            ship.put_back(batch.left)
        if not batch.records:
            return True
        status, answer = self._post(self.url, batch.body(), self._headers, self._timeout)
        with self._lock:
            outcome = ship.settle(batch, status, answer)
        if outcome.verdict == "rejected":
            log.error("the collector rejected %d records with HTTP %s; dropped", len(batch.records), status)
        elif outcome.refused:
            log.error("the collector refused %d records (%s); dropped", outcome.refused, outcome.why)
        return outcome.verdict != "retry"

    def _run(self) -> None:
        failures = 0
        while True:
            if not self._closing:
                wait = (
                    backoff_s(failures, self._retry_initial, self._retry_max) if failures else self._interval
                )
                self._wake.wait(wait)
                self._wake.clear()
            closing = self._closing
            while len(self._ship):
                if not self.send_once():
                    failures += 1
                    break
                failures = 0
            if closing:
                return
            time.sleep(0)  # let the host's threads run between batches
