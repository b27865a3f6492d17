from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter, defaultdict

import pytest

from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.probe.settings import ProbeConfig, RequestClass, Target
from lanewatch.collector.probe.suites import Answered, ProbeJob, Scheduler, parse_shard, plan, shard_of
from lanewatch.collector.record.timing import ErrorKind, RequestTiming


def cfg(**probe: object) -> LanewatchConfig:
    targets = [
        Target(name="fast", url="http://a", model="m", lane="fast"),
        Target(name="slow", url="http://b", model="m", lane="slow", classes=["short"]),
    ]
    return LanewatchConfig(targets=targets, probe=ProbeConfig(**probe))


def _sections(c: LanewatchConfig) -> tuple[list[Target], ProbeConfig]:
    return c.targets, c.probe


def test_plan_is_targets_times_their_classes() -> None:
    jobs = plan(*_sections(cfg()))
    assert [j.key for j in jobs] == [
        ("fast", "short"),
        ("fast", "summary"),
        ("fast", "story"),
        ("slow", "short"),
    ]


def test_shards_partition_targets_stably() -> None:
    names = [f"target-{i}" for i in range(40)]
    for n in (1, 2, 3, 5):
        owners = [shard_of(name, n) for name in names]
        assert all(0 <= o < n for o in owners)
        assert owners == [shard_of(name, n) for name in names]  # stable within a run
        if n > 1:
            assert len(set(owners)) == n  # 40 names spread over every shard
    # Stable across processes and versions: the first 8 bytes of SHA-256, not hash();
    # these values were taken with `printf target-$i | sha256sum`.
    assert [shard_of(f"target-{i}", 3) for i in range(6)] == [2, 0, 0, 0, 2, 0]


def test_plan_keeps_only_this_shards_targets() -> None:
    keep = {t: [j.key for j in plan(*_sections(cfg(shard=f"{i}/2")))] for i, t in enumerate(("s0", "s1"))}
    everything = [j.key for j in plan(*_sections(cfg()))]
    assert sorted(keep["s0"] + keep["s1"]) == sorted(everything)
    assert not set(keep["s0"]) & set(keep["s1"])


@pytest.mark.parametrize("bad", ["2/2", "0/0", "5/3"])
def test_bad_shard_names_the_field(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"probe\.shard"):
        parse_shard(bad)


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.now += delay
        await asyncio.sleep(0)


def record(job: ProbeJob) -> RequestTiming:
    return RequestTiming(source="probe", target=job.target.name, lane=job.target.lane,
                         request_class=job.request_class.name, model="m")  # fmt: skip


def jobs(n: int) -> list[ProbeJob]:
    return [
        ProbeJob(Target(name=f"t{i}", url="http://x", model="m"), RequestClass(name="short"))
        for i in range(n)
    ]


async def advance_to(t: FakeTime, end: float) -> None:
    """Yield to the scheduler until fake time reaches `end` (it moves only when it sleeps)."""
    while t.now < end:  # noqa: ASYNC110 (fake time: nothing to wait on but other tasks)
        await asyncio.sleep(0)


async def run_until(s: Scheduler, t: FakeTime, end: float) -> None:
    task = asyncio.create_task(s.run())
    await advance_to(t, end)
    s.shutdown()
    await asyncio.wait_for(task, 5)


async def test_each_job_runs_every_interval_with_bounded_jitter() -> None:
    t = FakeTime()
    seen: dict[tuple[str, str], list[float]] = defaultdict(list)
    seqs: dict[tuple[str, str], list[int]] = defaultdict(list)

    async def probe(job: ProbeJob, seq: int, answered: Answered) -> RequestTiming:
        seen[job.key].append(t.now)
        seqs[job.key].append(seq)
        return record(job)

    out: list[RequestTiming] = []
    s = Scheduler(jobs(3), probe, out.append, interval_s=10, jitter_ratio=0.2, concurrency=2,
                  clock=t.clock, sleep=t.sleep, rng=random.Random(7))  # fmt: skip
    await run_until(s, t, 1000 + 200)
    assert len(out) == sum(len(v) for v in seen.values())
    for key, times in seen.items():
        assert 18 <= len(times) <= 22, key
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(8 - 1e-9 <= g <= 12 + 1e-9 for g in gaps), gaps
        assert len(set(round(g, 6) for g in gaps)) > 1  # jitter actually varies the gaps
        assert seqs[key] == list(range(len(times)))
    assert min(v[0] for v in seen.values()) < 1010  # first runs spread over one interval


async def test_overlap_lets_a_slow_jobs_turns_run_beside_its_last_probe() -> None:
    t = FakeTime()
    gate = asyncio.Event()
    per_job: dict[tuple[str, str], int] = defaultdict(int)
    peak: dict[tuple[str, str], int] = defaultdict(int)

    async def probe(job: ProbeJob, seq: int, answered: Answered) -> RequestTiming:
        per_job[job.key] += 1
        peak[job.key] = max(peak[job.key], per_job[job.key])
        await gate.wait()  # every probe hangs: a lane slower than the interval
        per_job[job.key] -= 1
        return record(job)

    out: list[RequestTiming] = []
    s = Scheduler(jobs(2), probe, out.append, interval_s=1, concurrency=16, overlap=3, clock=t.clock,
                  sleep=t.sleep, rng=random.Random(1))  # fmt: skip
    task = asyncio.create_task(s.run())
    await advance_to(t, 1010)
    assert set(peak.values()) == {3}  # three turns of each job in flight, and no more
    assert s.started == 6 and s.skipped > 0  # the turns after that were skipped
    gate.set()
    await advance_to(t, 1015)
    assert s.started > 6  # the probes ended: the job's turns run again
    s.shutdown()
    await asyncio.wait_for(task, 5)


class CountingProbe:
    """A fake probe that counts the probes in flight and their peak: each waits for `answer` (then
    has its first token) when given, then for `finish`, and returns its record."""

    def __init__(self, finish: asyncio.Event, answer: asyncio.Event | None = None) -> None:
        self.finish, self.answer = finish, answer
        self.running = self.peak = 0

    async def __call__(self, job: ProbeJob, seq: int, answered: Answered) -> RequestTiming:
        self.running += 1
        self.peak = max(self.peak, self.running)
        if self.answer is not None:
            await self.answer.wait()
            answered()
        await self.finish.wait()
        self.running -= 1
        return record(job)


async def test_overlap_runs_beside_waiting_probes_only_once_the_lane_answers_one_turn_at_a_time() -> None:
    t = FakeTime()
    answer = asyncio.Event()  # the lane answers: every probe in flight gets its first token
    finish = asyncio.Event()  # the long answers end
    probe = CountingProbe(finish, answer)  # a long answer streams for many intervals
    s = Scheduler(jobs(1), probe, lambda r: None, interval_s=1, concurrency=16, overlap=3, clock=t.clock,
                  sleep=t.sleep, rng=random.Random(1))  # fmt: skip
    task = asyncio.create_task(s.run())
    await advance_to(t, 1010)
    assert probe.peak == 3 and s.started == 3  # all waiting: the overlap is the evidence the guard needs
    answer.set()
    await advance_to(t, 1011)
    finish.set()  # the three answers end together
    await advance_to(t, 1012)
    finish.clear()  # from here each answer streams until told
    started = s.started
    await advance_to(t, 1030)
    # The next probe got its first token at once and streamed on: no turn ran beside it, as
    # with overlap 1 (before, three long answers at a time: three times a healthy lane's load).
    assert s.started == started + 1 and probe.running == 1
    finish.set()
    s.shutdown()
    await asyncio.wait_for(task, 5)


async def test_concurrency_cap_and_overlapping_ticks_are_skipped() -> None:
    t = FakeTime()
    gate = asyncio.Event()
    probe = CountingProbe(gate)

    out: list[RequestTiming] = []
    s = Scheduler(jobs(8), probe, out.append, interval_s=1, concurrency=3, clock=t.clock, sleep=t.sleep,
                  rng=random.Random(1))  # fmt: skip
    task = asyncio.create_task(s.run())
    await advance_to(t, 1005)
    assert probe.peak == 3
    assert s.started == 8 and s.skipped > 0  # each job started once; later ticks skipped
    gate.set()
    await advance_to(t, 1010)
    s.shutdown()
    await asyncio.wait_for(task, 5)
    assert probe.peak == 3 and len(out) >= 8


async def test_a_raising_probe_or_sink_does_not_stop_the_schedule() -> None:
    t = FakeTime()
    calls = Counter[str]()

    async def probe(job: ProbeJob, seq: int, answered: Answered) -> RequestTiming:
        calls["probe"] += 1
        if seq % 2 == 0:
            raise RuntimeError("bug")
        return record(job)

    got: list[RequestTiming] = []

    def sink(r: RequestTiming) -> None:
        got.append(r)
        if len(got) == 1:
            raise RuntimeError("sink bug")

    s = Scheduler(jobs(1), probe, sink, interval_s=1, clock=t.clock, sleep=t.sleep, rng=random.Random(0))
    await run_until(s, t, 1010)
    assert calls["probe"] >= 9 and len(got) == calls["probe"]
    assert [r.error for r in got[:2]] == [ErrorKind.OTHER, None]


async def test_stop_cancels_probes_in_flight_and_returns() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def probe(job: ProbeJob, seq: int, answered: Answered) -> RequestTiming:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return record(job)

    s = Scheduler(jobs(1), probe, lambda r: None, interval_s=0.01)
    task = asyncio.create_task(s.run())
    await asyncio.wait_for(started.wait(), 5)  # a probe in flight, however slow the start
    s.shutdown()
    await asyncio.wait_for(task, 2)
    assert cancelled.is_set()


async def test_start_delays_count_the_wait_for_a_concurrency_slot() -> None:
    t = FakeTime()
    gate = asyncio.Event()

    async def probe(job: ProbeJob, seq: int, answered: Answered) -> RequestTiming:
        if job.target.name == "t0":
            await gate.wait()  # holds the only slot
        return record(job)

    delays: list[float] = []
    skips: list[None] = []
    s = Scheduler(jobs(2), probe, lambda r: None, interval_s=10, concurrency=1, clock=t.clock,
                  sleep=t.sleep, rng=random.Random(3))  # fmt: skip
    s.on_start = delays.append
    s.on_skip = lambda: skips.append(None)
    task = asyncio.create_task(s.run())
    await advance_to(t, 1025)
    assert len(delays) == 1 and delays[0] == 0.0  # t0 came due first (this seed) and holds the slot
    released_at = t.now
    gate.set()
    for _ in range(20):
        await asyncio.sleep(0)
    s.shutdown()
    await asyncio.wait_for(task, 5)
    assert len(delays) >= 2
    assert max(delays) > 5  # the waiting job started seconds late, and that is what was reported
    assert max(delays) <= released_at - 1000
    assert skips  # t0's later turns came while it still ran
