"""One router's applies: never two at once, the newest state first, each within its deadline."""

from __future__ import annotations

import asyncio

from lanewatch.collector.degrade.adapters import ALL_ACTIONS, AdapterError, RouterView
from lanewatch.collector.degrade.adapters.base import Capability
from lanewatch.collector.degrade.applier import Applier, Attempt
from lanewatch.collector.degrade.state import LaneSpec


def lanes(percent: int) -> dict[str, LaneSpec]:
    return {"slow": LaneSpec("fast", percent)}


class GatedAdapter:
    """An adapter whose applies wait for the test to let them finish, one gate per apply."""

    name = "gated"
    capabilities: frozenset[Capability] = ALL_ACTIONS

    def __init__(self) -> None:
        self.started: list[int] = []
        self.applied: list[int] = []
        self.gates: list[asyncio.Event] = []
        self.running = 0
        self.most_at_once = 0
        self.hang = False

    async def apply(self, lanes: dict[str, LaneSpec], revision: int) -> None:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        self.started.append(revision)
        gate = asyncio.Event()
        self.gates.append(gate)
        try:
            await gate.wait()
            if self.hang:
                await asyncio.sleep(3600)
            self.applied.append(revision)
        finally:
            self.running -= 1

    async def read_back(self) -> RouterView | None:
        return None

    async def finalize(self, revision: int) -> None:
        await self.apply({}, revision)

    async def shutdown(self) -> None:
        pass


async def started(adapter: GatedAdapter, count: int) -> None:
    for _ in range(500):
        if len(adapter.started) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not {count} applies started: {adapter.started}")


async def test_applies_never_overlap_and_the_newest_waiting_state_replaces_the_rest() -> None:
    adapter, reports = GatedAdapter(), list[Attempt]()
    applier = Applier(adapter, reports.append, deadline_s=30)
    first = applier.want(lanes(50), 1)
    await started(adapter, 1)
    second, third = applier.want(lanes(100), 2), applier.want({}, 3)
    adapter.gates[0].set()
    await started(adapter, 2)
    adapter.gates[1].set()
    assert await first and await second and await third
    assert adapter.started == [1, 3] and adapter.applied == [1, 3]  # 2 waited, and 3 replaced it
    assert adapter.most_at_once == 1
    assert [(a.revision, a.lanes, a.error) for a in reports] == [(1, lanes(50), None), (3, {}, None)]
    await applier.close()


async def test_an_older_revision_asked_for_after_a_newer_one_is_never_applied_after_it() -> None:
    adapter = GatedAdapter()
    applier = Applier(adapter, lambda attempt: None, deadline_s=30)
    applier.want(lanes(50), 5)
    await started(adapter, 1)
    applier.want(lanes(100), 6)
    late = applier.want(lanes(50), 5)  # a reconcile that read the state before revision 6
    adapter.gates[0].set()
    await started(adapter, 2)
    adapter.gates[1].set()
    assert await late
    assert adapter.applied == [5, 6]
    await applier.close()


async def test_an_apply_past_its_deadline_is_cancelled_reported_as_a_timeout_and_retried() -> None:
    adapter, reports = GatedAdapter(), list[Attempt]()
    adapter.hang = True
    applier = Applier(adapter, reports.append, deadline_s=0.2)
    done = applier.want(lanes(50), 1)
    await started(adapter, 1)
    adapter.gates[0].set()
    assert not await asyncio.wait_for(done, 5)
    [attempt] = reports
    assert attempt.reason == "timeout" and str(attempt.error) == "no answer within 0.2 s"
    assert isinstance(attempt.error, AdapterError) and adapter.running == 0  # cancelled, not left running
    adapter.hang = False
    await started(adapter, 2)  # retried by itself, after its backoff
    adapter.gates[1].set()
    for _ in range(500):
        if len(reports) == 2:
            break
        await asyncio.sleep(0.01)
    assert reports[1] == Attempt("gated", lanes(50), 1)
    await applier.close()


async def test_a_refusal_and_a_bug_are_reported_with_their_reasons() -> None:
    reports: list[Attempt] = []

    class Refusing(GatedAdapter):
        async def apply(self, lanes: dict[str, LaneSpec], revision: int) -> None:
            if revision == 1:
                raise AdapterError("no such lane", retryable=False)
            raise KeyError("bug")

    applier = Applier(Refusing(), reports.append, deadline_s=5)
    assert not await applier.want({}, 1)
    assert not await applier.want({}, 2)
    assert [(a.reason, type(a.error).__name__) for a in reports] == [
        ("refused", "AdapterError"),
        ("unexpected", "KeyError"),
    ]
    await applier.close()
