"""Runs the pure engine in real time inside the server's event loop.

One asyncio task steps the engine: it asks for a step starting now, sleeps until the step's end,
then hands each produced token to its request's queue. Steps follow each other on the engine's
own timeline (the next starts where the last ended), so a late wake-up of the event loop delays
delivery by that much once, without stretching the model; only when the loop falls more than
`RESYNC_S` behind does the timeline restart from the clock (an overloaded host, like an
overloaded vLLM, runs slower).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from .engine import Engine, EngineRequest, RequestTimes, StepResult

RESYNC_S = 0.005


@dataclass(frozen=True)
class Token:
    """Tokens delivered to a request at a step's end: the first one's index, how many (more than
    one with speculative decoding), the step end, and the request's times on its last."""

    index: int
    at_s: float
    times: RequestTimes | None
    count: int = 1


ABORTED = Token(-1, 0.0, None)


class EngineRunner:
    """The engine's real-time driver; every request gets an asyncio.Queue of `Token`s."""

    def __init__(
        self,
        engine: Engine,
        clock: Callable[[], float] = time.perf_counter,
        factors: Callable[[], tuple[float, float]] = lambda: (1.0, 1.0),
        on_step: Callable[[StepResult], None] = lambda _: None,
    ) -> None:
        self.engine = engine
        self._clock = clock
        self._factors = factors
        self._on_step = on_step
        self._queues: dict[str, asyncio.Queue[Token]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._next_start: float | None = None

    @property
    def in_flight(self) -> int:
        """Requests submitted and not yet finished or aborted."""
        return len(self._queues)

    def start(self) -> None:
        """Start stepping in the running event loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="lanewatch-sim-engine")

    async def shutdown(self) -> None:
        """Stop stepping."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def submit(self, req: EngineRequest) -> asyncio.Queue[Token]:
        """Queue a request; its tokens arrive on the returned queue."""
        queue: asyncio.Queue[Token] = asyncio.Queue()
        self._queues[req.request_id] = queue
        self.engine.add(req)
        self._wake.set()
        return queue

    def abort(self, request_id: str) -> None:
        """Drop a request (client gone); its queue gets `ABORTED`."""
        queue = self._queues.pop(request_id, None)
        if queue is not None:
            self.engine.abort(request_id)
            queue.put_nowait(ABORTED)

    async def _run(self) -> None:
        while True:
            if not self.engine.has_work:
                self._wake.clear()
                self._next_start = None
                await self._wake.wait()
            now = self._clock()
            start = now
            if self._next_start is not None and now - self._next_start < RESYNC_S:
                start = self._next_start
            prefill, decode = self._factors()
            step = self.engine.step(start, prefill, decode)
            if step is None:  # nothing schedulable: wait for the next arrival
                self._next_start = None
                self._wake.clear()
                await self._wake.wait()
                continue
            delay = step.end_s - self._clock()
            await asyncio.sleep(delay if delay > 0 else 0)
            self._next_start = step.end_s
            self._deliver(step)

    def _deliver(self, step: StepResult) -> None:
        for out in step.outputs:
            queue = self._queues.get(out.request_id)
            if queue is None:
                continue
            times = step.finished.get(out.request_id) if out.finished else None
            queue.put_nowait(Token(out.index, step.end_s, times, out.count))
            if out.finished:
                del self._queues[out.request_id]
        self._on_step(step)
