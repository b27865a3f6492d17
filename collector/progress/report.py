"""Reports a process's requests under way to the collector's fast guard (`POST /v1/progress`).

Every `interval_s` the in-flight table (inflight.py) becomes one small body (wire.py):
the first tokens that came since the last report and each waiting request's age. The data
path's cost is a dict insert and delete per request; the scan runs in this task, on the host's
event loop (the gateway's, or the LiteLLM proxy's for lanewatch's handler there). One report is
in the air at a time: a report the collector does not take is dropped and counted, not retried:
the next one, a fraction of a second later, says the ages again, and a first token it carried is
still on the request's record. A collector that runs no guard answers 404; the reporter then
asks again every 30 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from time import perf_counter

import aiohttp

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.progress.inflight import InFlight
from lanewatch.collector.progress.wire import PROGRESS_PATH, encode_progress

__all__ = ["NO_GUARD_RETRY_S", "ProgressReporter", "reporter_id"]

log = logging.getLogger("lanewatch.progress")
NO_GUARD_RETRY_S = 30.0  # a collector without the guard answers 404: report again this much later


def reporter_id(prefix: str = "gw") -> str:
    """This process's reporter id: a prefix naming the kind of reporter, host, pid and a random
    suffix (ids restart with the process)."""
    host = "".join(c for c in socket.gethostname() if c.isalnum() or c in "-.")[:32] or "host"
    return f"{prefix}-{host}-{os.getpid()}-{secrets.token_hex(3)}"


class ProgressReporter:
    """The task that posts the in-flight table's events; counts what it sent and lost."""

    def __init__(
        self,
        table: InFlight,
        collector_url: str,
        token: str | None,
        interval_s: float,
        timeout_s: float,
        prefix: str = "gw",
    ) -> None:
        self.table = table
        self.url = collector_url.rstrip("/") + PROGRESS_PATH
        self.reporter = reporter_id(prefix)
        self.interval_s = interval_s
        self._headers = {"Content-Type": "application/json"}
        if token is not None:
            self._headers[AUTHORIZATION] = f"Bearer {token}"
        self._timeout = aiohttp.ClientTimeout(total=min(timeout_s, max(interval_s * 4, 1.0)))
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.sent = 0  # events the collector took
        self.lost = 0  # events of reports it did not take
        self._failing = False

    @property
    def running(self) -> bool:
        """Whether the task runs (started and not stopped)."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start reporting on the running loop."""
        self._task = asyncio.create_task(self._run(), name="progress-reporter")

    async def shutdown(self) -> None:
        """Stop reporting."""
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        async with aiohttp.ClientSession(timeout=self._timeout) as session:
            while not self._stop.is_set():
                events = self.table.report(perf_counter())
                wait = self.interval_s
                if events:
                    status = await self._post(session, encode_progress(self.reporter, events), len(events))
                    if status == 404:  # the collector runs no guard: ask again now and then
                        wait = max(wait, NO_GUARD_RETRY_S)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._stop.wait()

    async def _post(self, session: aiohttp.ClientSession, body: bytes, n: int) -> int | None:
        """Post one report; its HTTP status, or None without an answer."""
        status: int | None = None
        try:
            async with session.post(self.url, data=body, headers=self._headers) as resp:
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            why = type(exc).__name__
        else:
            why = f"HTTP {status}"
        if status == 200:
            self.sent += n
            if self._failing:
                log.info("the collector takes progress reports again")
                self._failing = False
            return status
        self.lost += n
        if not self._failing:
            if status == 404:
                log.info(
                    "the collector runs no fast guard (404 on %s); asking again every %.0f s",
                    self.url,
                    NO_GUARD_RETRY_S,
                )
            else:
                log.warning(
                    "cannot report progress to the collector (%s); the fast guard is blind meanwhile", why
                )
            self._failing = True
        return status
