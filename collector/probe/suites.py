"""Probe suites: which (target, request class) pairs to probe, and a scheduler that runs them.

`plan` turns the config into jobs: every target in this collector's shard times its request
classes. `Scheduler` runs each job every `interval_s` (± jitter) under a concurrency cap until
stopped and hands every RequestTiming to a sink; its clock, sleep and random source are
injected so tests run on fake time. `ProbeSuite` joins the two with one Prober per target.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import heapq
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry.trace import Tracer

from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.probe.prober import Prober, spec_for
from lanewatch.collector.probe.settings import ProbeConfig, RequestClass, Target
from lanewatch.collector.progress.inflight import InFlight
from lanewatch.collector.record.builder import RecordBuilder
from lanewatch.collector.record.sink import RecordSink
from lanewatch.collector.record.timing import ErrorKind, RequestTiming

log = logging.getLogger(__name__)

Answered = Callable[[], None]  # a probe calls it when its first token comes
RunProbe = Callable[["ProbeJob", int, Answered], Awaitable[RequestTiming]]


@dataclass(frozen=True, slots=True)
class ProbeJob:
    """One request class probed on one target."""

    target: Target
    request_class: RequestClass

    @property
    def key(self) -> tuple[str, str]:
        """(target name, class name)."""
        return (self.target.name, self.request_class.name)


@dataclass(slots=True)
class _Flight:
    """A probe under way, as the scheduler sees it: whether the lane has answered it yet."""

    answered: bool = False

    def answer(self) -> None:
        """Mark the probe's first token come."""
        self.answered = True


def parse_shard(value: str | None) -> tuple[int, int] | None:
    """`"i/N"` → (i, N) with 0 ≤ i < N; None for no sharding; ConfigError for anything else."""
    if value is None:
        return None
    index, _, count = value.partition("/")
    if not (index.isdigit() and count.isdigit()) or not 0 <= int(index) < int(count):
        raise ConfigError(f"probe.shard: {value!r} must be i/N with 0 <= i < N")
    return int(index), int(count)


def shard_of(target_name: str, shards: int) -> int:
    """The shard (0..shards-1) that probes a target: a stable hash of its name."""
    digest = hashlib.sha256(target_name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards


def plan(targets: Sequence[Target], probe: ProbeConfig) -> list[ProbeJob]:
    """The jobs of this collector: targets in its shard × their request classes."""
    shard = parse_shard(probe.shard)
    classes = {c.name: c for c in probe.classes}
    jobs = []
    for t in targets:
        if shard is not None and shard_of(t.name, shard[1]) != shard[0]:
            continue
        for name in t.classes if t.classes is not None else list(classes):
            jobs.append(ProbeJob(t, classes[name]))
    return jobs


class Scheduler:
    """Runs every job each `interval_s` (± jitter_ratio), at most `concurrency` at once and at most
    `overlap` of one job, the extra ones only while every probe of the job still waits."""

    def __init__(
        self,
        jobs: list[ProbeJob],
        run_probe: RunProbe,
        sink: RecordSink,
        *,
        interval_s: float,
        jitter_ratio: float = 0.0,
        concurrency: int = 4,
        overlap: int = 1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.jobs = jobs
        self._run_probe = run_probe
        self._sink = sink
        self._interval = interval_s
        self._jitter = jitter_ratio
        self._sem = asyncio.Semaphore(concurrency)
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._stop = asyncio.Event()
        self._stopper: asyncio.Task[Literal[True]] | None = None
        self._overlap = overlap
        self._inflight: dict[int, dict[asyncio.Task[None], _Flight]] = {}
        self.started = 0  # probes started
        self.skipped = 0  # ticks skipped: `overlap` of the job's probes ran, or one had its answer
        self.on_start: Callable[[float], None] | None = None  # gets each probe's start delay
        self.on_skip: Callable[[], None] | None = None
        self._seq = [0] * len(jobs)

    def shutdown(self) -> None:
        """Ask `run` to return; probes in flight are cancelled."""
        self._stop.set()

    async def run(self) -> None:
        """Probe until `shutdown()`; first runs spread over one interval."""
        now = self._clock()
        heap = [(now + self._rng.uniform(0, self._interval), i) for i in range(len(self.jobs))]
        heapq.heapify(heap)
        try:
            while heap and not self._stop.is_set():
                due, i = heap[0]
                if await self._wait(due - self._clock()):
                    break
                heapq.heapreplace(heap, (max(self._next(due), self._clock()), i))
                self._launch(i, due)
        finally:
            if self._stopper is not None:
                self._stopper.cancel()
                self._stopper = None
            await self._cancel_inflight()

    def _next(self, due: float) -> float:
        return due + self._interval * (1 + self._rng.uniform(-self._jitter, self._jitter))

    async def _wait(self, delay: float) -> bool:
        """Sleep `delay` (if positive); True when stopped meanwhile."""
        if delay <= 0:
            await asyncio.sleep(0)  # let probes run even when we are behind
            return self._stop.is_set()
        if self._stopper is None:  # one waiter on the stop event for the whole run, not one per tick
            self._stopper = asyncio.ensure_future(self._stop.wait())
        sleeper = asyncio.ensure_future(self._sleep(delay))
        waiting: set[asyncio.Future[Any]] = {sleeper, self._stopper}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        sleeper.cancel()
        return self._stop.is_set()

    def _launch(self, i: int, due: float) -> None:
        running = self._inflight.setdefault(i, {})
        # A probe beside the job's last one is evidence only while the lane keeps them all waiting
        # (the fast guard's, behind a router that reports nothing); once one has its first token
        # the lane is answering, and another probe of a long answer would only add its load.
        if len(running) >= self._overlap or any(f.answered for f in running.values()):
            self.skipped += 1
            if self.on_skip is not None:
                self.on_skip()
            return
        self.started += 1
        seq = self._seq[i]
        self._seq[i] += 1
        flight = _Flight()
        task = asyncio.create_task(self._one(i, seq, due, flight))
        running[task] = flight
        task.add_done_callback(functools.partial(self._done, i))

    def _done(self, i: int, task: asyncio.Task[None]) -> None:
        self._inflight.get(i, {}).pop(task, None)

    async def _one(self, i: int, seq: int, due: float, flight: _Flight) -> None:
        job = self.jobs[i]
        async with self._sem:
            if self.on_start is not None:
                self.on_start(self._clock() - due)
            try:
                record = await self._run_probe(job, seq, flight.answer)
            except Exception:  # a prober bug must not stop the schedule; count it as OTHER
                log.exception("probe %s/%s raised", *job.key)
                record = _failed(job)
        try:
            self._sink(record)
        except Exception:
            log.exception("probe sink raised on %s/%s", *job.key)

    async def _cancel_inflight(self) -> None:
        tasks = [t for running in self._inflight.values() for t in running]
        for t in tasks:
            t.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)


def _failed(job: ProbeJob) -> RequestTiming:
    return RecordBuilder(
        source="probe",
        target=job.target.name,
        lane=job.target.lane,
        request_class=job.request_class.name,
        model=job.target.model,
        api=job.target.api,
        started_at=time.time(),
        error=ErrorKind.OTHER,
    ).build()


class ProbeSuite:
    """The configured probe suite: one Prober per target, one Scheduler over all jobs."""

    def __init__(
        self,
        targets: Sequence[Target],
        p: ProbeConfig,
        sink: RecordSink,
        *,
        record_content: bool = False,
        tracer: Tracer | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.jobs = plan(targets, p)
        probed = {j.target.name: j.target for j in self.jobs}
        self.in_flight = InFlight()  # every prober's probes under way, for the fast guard
        self._probers = {
            name: Prober(
                t,
                connection=p.connection,
                timeouts=p.timeouts,
                tracer=tracer,
                max_connections=p.concurrency,
                record_content=record_content,
                in_flight=self.in_flight,
            )
            for name, t in probed.items()
        }
        self.scheduler = Scheduler(
            self.jobs,
            self._probe,
            sink,
            interval_s=p.interval_s,
            jitter_ratio=p.jitter_ratio,
            concurrency=p.concurrency,
            overlap=p.overlap,
            rng=rng,
        )

    async def _probe(self, job: ProbeJob, seq: int, answered: Answered) -> RequestTiming:
        prober = self._probers[job.target.name]
        return await prober.probe(spec_for(job.request_class, job.target, seq), on_first_token=answered)

    async def run(self) -> None:
        """Probe until `shutdown()`, then close every connection."""
        try:
            await self.scheduler.run()
        finally:
            await asyncio.gather(*(pr.aclose() for pr in self._probers.values()), return_exceptions=True)

    def shutdown(self) -> None:
        """Ask `run` to return."""
        self.scheduler.shutdown()
