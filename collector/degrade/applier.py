"""One router's applies: one at a time, the newest state first, each within a deadline.

The controller tells each adapter's applier the state it wants that router to hold, and the
applier applies it on a task of its own, so a router that is slow or hangs holds back only
itself: never another router, the next decision or the reconcile loop. An apply that has not
finished within `deadline_s` is cancelled and fails with "no answer within N s" (an adapter
puts back what a cancelled apply left half done). Applies to one router never overlap, and a
state asked for while one is under way replaces any that waited: the next apply takes the
newest, and an older revision never replaces a newer one asked for, so a late apply of an old
revision cannot land after a newer one on the same router. A failed apply is tried again
after a backoff (0.5 s, doubling up to `retry_max_s`), at once when a newer state is asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from .adapters import Adapter, AdapterError
from .state import LaneSpec

__all__ = ["APPLY_TIMEOUT_S", "FAILURE_REASONS", "Applier", "Attempt", "FailureReason"]

log = logging.getLogger("lanewatch.degrade")

APPLY_TIMEOUT_S: Final = 5.0  # one apply, all its calls and retries; nginx and Envoy take ~0.2-0.3 s
RETRY_FIRST_S: Final = 0.5
# Why an apply failed, as `lanewatch_degrade_adapter_failures_total{reason}` counts it: no answer
# within the deadline; the router (or the render) refused the state; an error worth retrying
# (unreachable, 5xx); an exception the adapter did not mean to raise (a bug).
FailureReason = Literal["timeout", "refused", "error", "unexpected"]
FAILURE_REASONS: tuple[FailureReason, ...] = ("timeout", "refused", "error", "unexpected")


@dataclass(frozen=True)
class Attempt:
    """One apply to one router: what it was asked to hold, and why it failed (None: it holds it)."""

    adapter: str
    lanes: dict[str, LaneSpec]
    revision: int
    error: Exception | None = None
    reason: FailureReason | None = None


class Applier:
    """Applies the newest wanted state to one adapter, on its own task, one apply at a time."""

    def __init__(
        self,
        adapter: Adapter,
        report: Callable[[Attempt], None],
        deadline_s: float = APPLY_TIMEOUT_S,
        retry_max_s: float = 15.0,
    ) -> None:
        self.adapter = adapter
        self.deadline_s = deadline_s
        self.retry_max_s = retry_max_s
        self._report = report
        self._wanted: tuple[dict[str, LaneSpec], int] | None = None
        self._waiting: list[asyncio.Future[bool]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def want(self, lanes: dict[str, LaneSpec], revision: int) -> asyncio.Future[bool]:
        """Ask the router to hold `lanes`; the future says whether the apply that covers it succeeded.

        A revision older than one already asked for is not applied: the newer one covers it.
        """
        if self._wanted is None or revision >= self._wanted[1]:
            self._wanted = (dict(lanes), revision)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()
        self._waiting.append(done)
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name=f"apply to {self.adapter.name}")
        return done

    async def close(self) -> None:
        """Stop applying; an apply under way is cancelled."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for done in self._waiting:
            done.cancel()
        self._waiting = []

    async def _run(self) -> None:
        delay = RETRY_FIRST_S
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._wanted is None:
                continue
            lanes, revision = self._wanted
            waiting, self._waiting = self._waiting, []
            ok = await self._attempt(lanes, revision)
            for done in waiting:
                if not done.done():
                    done.set_result(ok)
            if ok:
                delay = RETRY_FIRST_S
                continue
            if not self._wake.is_set():  # no newer state asked for: retry this one after a backoff
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                self._wake.set()
            delay = min(delay * 2, max(self.retry_max_s, RETRY_FIRST_S))

    async def _attempt(self, lanes: dict[str, LaneSpec], revision: int) -> bool:
        name = self.adapter.name
        error: Exception | None = None
        reason: FailureReason | None = None
        deadline = asyncio.timeout(self.deadline_s)
        try:
            async with deadline:
                await self.adapter.apply(lanes, revision)
        except TimeoutError as exc:
            if deadline.expired():
                error = AdapterError(f"no answer within {self.deadline_s:g} s", retryable=True)
                reason = "timeout"
            else:  # a TimeoutError of the adapter's own, not ours: it meant an AdapterError
                log.exception("adapter %s raised unexpectedly", name)
                error, reason = exc, "unexpected"
        except AdapterError as exc:
            error, reason = exc, "error" if exc.retryable else "refused"
        except Exception as exc:  # any failure, expected or not, is retried
            log.exception("adapter %s raised unexpectedly", name)
            error, reason = exc, "unexpected"
        try:
            self._report(Attempt(name, lanes, revision, error, reason))
        except Exception:  # a report must never stop the applies that keep the router right
            log.exception("could not report adapter %s's apply", name)
        return error is None
