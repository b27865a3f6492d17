"""Ships records to the collector's `POST /v1/records` from a thread of its own (stdlib only).

The host's side is `append`: one deque append under a lock held for a few instructions, so the
proxy's event loop never waits on the network or on this module. A daemon thread sends batches
(`{"records": [...]}`, each record with a `record_id` digest of its JSON so a batch sent again is
taken once) by count or every `interval_s`, with the ingest token as a bearer token. A full
queue drops the oldest record; a send with no answer (or 408, 429, 5xx) puts the batch back and
backs off; any other refusal drops the batch; each drop is counted by reason in `stats`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from lanewatch.collector.record.timing import RequestTiming

__all__ = ["RECORDS_PATH", "Post", "RecordShipper", "ShipStats", "batch_body", "urllib_post"]

log = logging.getLogger("lanewatch.litellm.ship")
RECORDS_PATH = "/v1/records"  # the collector's (collector/collect/records_http.py)
_RETRY = frozenset({408, 429})
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


def _encoded(record: RequestTiming) -> bytes:
    body = json.dumps(record.to_json(), separators=(",", ":"), allow_nan=False).encode()
    digest = hashlib.blake2b(body, digest_size=16).hexdigest()
    return body[:-1] + b',"record_id":"' + digest.encode() + b'"}'


_YIELD_EVERY = 8  # records encoded between GIL hand-overs: ~0.25 ms of JSON at a time


def batch_body(records: list[RequestTiming]) -> bytes:
    """The batch as the collector reads it (collector/record/batch.py).

    Encoding holds the GIL (about 30 us a record): every few records this thread sleeps(0), so
    the proxy's event loop thread waits a fraction of a millisecond, not the whole batch's encoding.
    """
    parts = []
    for i, record in enumerate(records):
        if i and i % _YIELD_EVERY == 0:
            time.sleep(0)
        parts.append(_encoded(record))
    return b'{"records":[' + b",".join(parts) + b"]}"


def _refused(answer: bytes) -> int:
    try:
        count = json.loads(answer).get("refused_count", 0)
    except (ValueError, AttributeError):
        return 0
    return count if isinstance(count, int) else 0


@dataclass(slots=True)
class ShipStats:
    """Counters since start."""

    shipped: int = 0
    send_failures: int = 0
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> records


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
    ) -> None:
        self.url = collector_url.rstrip("/") + RECORDS_PATH
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._queue: deque[RequestTiming] = deque()
        self._max, self._batch = queue_records, batch_records
        self._interval, self._timeout, self._retry_max = interval_s, timeout_s, retry_max_s
        self._post = post
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None
        self.stats = ShipStats()

    @property
    def queued(self) -> int:
        """Records waiting to be sent."""
        return len(self._queue)

    def append(self, record: RequestTiming) -> None:
        """Queue a record: never waits; drops the oldest when full; starts the thread on first use."""
        with self._lock:
            if len(self._queue) >= self._max:
                self._queue.popleft()
                self.stats.dropped["queue_full"] += 1
            self._queue.append(record)
            full = len(self._queue) >= self._batch
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
            self.stats.dropped["shutdown"] += len(self._queue)
            self._queue.clear()

    def _take(self) -> list[RequestTiming]:
        with self._lock:
            n = min(self._batch, len(self._queue))
            return [self._queue.popleft() for _ in range(n)]

    def _put_back(self, batch: list[RequestTiming]) -> None:
        with self._lock:
            room = self._max - len(self._queue)
            keep = batch[len(batch) - max(room, 0) :] if room < len(batch) else batch
            self.stats.dropped["queue_full"] += len(batch) - len(keep)
            self._queue.extendleft(reversed(keep))

    def send_once(self) -> bool:
        """Send one batch of the oldest records; False when it must be tried again later."""
        batch = self._take()
        if not batch:
            return True
        try:
            body = batch_body(batch)
        except ValueError:  # a NaN: RequestTiming refuses them, so this stays at zero
            self.stats.dropped["unencodable"] += len(batch)
            return True
        status, answer = self._post(self.url, body, self._headers, self._timeout)
        if status is not None and 200 <= status < 300:
            refused = min(_refused(answer), len(batch))
            self.stats.dropped["refused"] += refused
            self.stats.shipped += len(batch) - refused
            return True
        if status is not None and status < 500 and status not in _RETRY:
            self.stats.dropped["rejected"] += len(batch)
            log.error("the collector rejected %d records with HTTP %s; dropped", len(batch), status)
            return True
        self.stats.send_failures += 1
        self._put_back(batch)
        return False

    def _run(self) -> None:
        failures = 0
        while True:
            if not self._closing:
                self._wake.wait(self._interval if not failures else min(self._retry_max, 0.5 * 2**failures))
                self._wake.clear()
            closing = self._closing
            while self._queue:
                if not self.send_once():
                    failures += 1
                    break
                failures = 0
            if closing:
                return
            time.sleep(0)  # let the host's threads run between batches
