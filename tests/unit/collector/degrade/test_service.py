from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lanewatch.collector.degrade.state import ControllerState, LaneSpec
from lanewatch.collector.degrade.webhook import parse_notification
from lanewatch.exporters import names
from tests.alertmanager_bodies import alert, body, encode

from .conftest import T0, Controller, RecordingAdapter

SHIFT50 = {"slow": LaneSpec("fast", 50)}
SHIFT100 = {"slow": LaneSpec("fast", 100)}


def firing(starts: float = T0) -> bytes:
    return encode(body(alert("firing", starts=starts)))


def resolved(starts: float = T0) -> bytes:
    return encode(body(alert("resolved", starts=starts)))


async def test_notification_is_committed_then_applied(controller: Controller) -> None:
    handled = await controller.service.handle(parse_notification(firing()))
    assert handled.changed and handled.revision == 1
    assert controller.store.load().revision == 1  # committed before anything is applied
    assert controller.adapter.applied == []
    assert await controller.service.reconcile()
    assert controller.adapter.applied == [(1, SHIFT50)]
    assert controller.sample(names.DEGRADE_ACTIVE, lane="slow", action="shift") == 1.0
    assert controller.sample(names.DEGRADE_ACTIVE, lane="fast", action="shift") == 0.0
    assert controller.sample(names.DEGRADE_SHIFT_RATIO, lane="slow", to_lane="fast") == 0.5
    assert controller.sample(names.DEGRADE_MAX_TOKENS_CAP, lane="slow") == 0.0
    tally = names.DEGRADE_TRANSITIONS_TOTAL
    assert controller.sample(tally, lane="slow", action="shift", direction="apply") == 1.0
    assert controller.sample(names.DEGRADE_ADAPTER_SYNCED, adapter="recording") == 1.0
    assert controller.sample(names.DEGRADE_ALERTS_TOTAL, outcome="fired") == 1.0


async def test_replay_changes_nothing(controller: Controller) -> None:
    await controller.service.handle(parse_notification(firing()))
    audit = controller.store.audit_count()
    controller.clock.now += 1
    handled = await controller.service.handle(parse_notification(firing()))
    assert not handled.changed and handled.decision.outcomes == ("duplicate",)
    assert controller.store.load().revision == 1 and controller.store.audit_count() == audit


async def test_ticks_escalate_and_restore_with_the_clock(controller: Controller) -> None:
    svc, clock = controller.service, controller.clock
    await svc.handle(parse_notification(firing()))
    clock.now = T0 + 3
    await svc.tick()
    await svc.reconcile()
    clock.now = T0 + 4
    await svc.handle(parse_notification(resolved()))
    clock.now = T0 + 13  # stable since T0+4 (5 s) and held since the escalation at T0+3 (10 s)
    await svc.tick()
    await svc.reconcile()
    assert [lanes for _, lanes in controller.adapter.applied] == [SHIFT100, {}]
    events = [e.event for _, _, e in controller.store.recent(20)]
    assert events == ["fired", "apply", "escalate", "resolved", "restore"]


async def test_failed_adapter_keeps_the_state_counts_and_recovers(controller: Controller) -> None:
    svc, adapter = controller.service, controller.adapter
    await svc.handle(parse_notification(firing()))
    adapter.fail = True
    assert not await svc.reconcile()
    assert not await svc.reconcile()
    assert controller.sample(names.DEGRADE_ADAPTER_FAILURES_TOTAL, adapter="recording", reason="error") == 2.0
    assert controller.sample(names.DEGRADE_ADAPTER_SYNCED, adapter="recording") == 0.0
    assert svc.state.tracks and controller.store.load().revision == 1  # the intent is kept
    adapter.fail = False
    assert await svc.reconcile()
    assert adapter.applied == [(1, SHIFT50)]
    events = [e.event for _, _, e in controller.store.recent(10)]
    assert events[-2:] == ["adapter_failed", "adapter_ok"]  # one entry per change, not per failure


async def test_restart_mid_degrade_resumes_and_reapplies(tmp_path: Path) -> None:
    first = Controller(tmp_path)
    await first.service.handle(parse_notification(firing()))
    first.clock.now = T0 + 3
    await first.service.tick()  # escalated to 100%, never applied: the process "dies" here
    state = first.service.state
    first.store.close()

    second = Controller(tmp_path)
    assert second.service.state == state and second.service.revision == 2
    second.service.resume()
    assert await second.service.reconcile()
    assert second.adapter.applied == [(2, SHIFT100)]
    assert second.store.recent(1)[0][2].event == "resumed"
    # the replayed firing notification after the restart still acts only once
    handled = await second.service.handle(parse_notification(firing()))
    assert not handled.changed
    second.store.close()


async def test_store_failure_leaves_memory_on_the_old_side(controller: Controller) -> None:
    def broken(*args: object, **kwargs: object) -> int:
        raise OSError("disk full")

    controller.store.commit = broken  # type: ignore[method-assign]
    with pytest.raises(OSError, match="disk full"):
        await controller.service.handle(parse_notification(firing()))
    assert controller.service.state == ControllerState() and controller.service.revision == 0


async def test_run_drives_ticks_and_reconciles_until_stopped(controller: Controller) -> None:
    svc, clock = controller.service, controller.clock
    await svc.handle(parse_notification(firing()))
    clock.now = T0 + 3
    stop = asyncio.Event()
    runner = asyncio.create_task(svc.run(stop, tick_s=0.01, reconcile_s=60))
    for _ in range(500):
        if controller.adapter.applied and controller.adapter.applied[-1][1] == SHIFT100:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(runner, 5)
    assert controller.adapter.applied[-1] == (2, SHIFT100)


def test_resume_without_a_degrade_writes_nothing(controller: Controller) -> None:
    controller.service.resume()
    assert controller.store.audit_count() == 0 and controller.store.load().revision == 0


async def test_an_adapter_bug_is_a_counted_failure_not_a_dead_loop(controller: Controller) -> None:
    async def broken(lanes: object, revision: int) -> None:
        raise KeyError("bug")

    controller.adapter.apply = broken  # type: ignore[method-assign]
    await controller.service.handle(parse_notification(firing()))
    assert not await controller.service.reconcile()
    failures = names.DEGRADE_ADAPTER_FAILURES_TOTAL
    assert controller.sample(failures, adapter="recording", reason="unexpected") == 1.0


async def test_synced_follows_the_lanes_not_the_revision(controller: Controller) -> None:
    svc = controller.service
    await svc.handle(parse_notification(firing()))
    await svc.reconcile()
    other = encode(body(alert("resolved", fingerprint="00000000000000ff", starts=T0)))
    assert (await svc.handle(parse_notification(other))).changed  # remembered; no router change
    assert svc.synced() == {"recording": True}
    controller.clock.now = T0 + 3
    await svc.tick()  # escalation: the router now lags until the next reconcile
    assert svc.synced() == {"recording": False}


async def test_a_silent_firing_alert_expires_with_a_warning_count_and_audit(
    controller: Controller, caplog: pytest.LogCaptureFixture
) -> None:
    svc, clock = controller.service, controller.clock
    stale_after = svc.policy.firing_stale_after_s
    assert stale_after is not None  # the default policy lets go of silent alerts
    await svc.handle(parse_notification(firing()))
    clock.now = T0 + stale_after / 2
    repeat = await svc.handle(parse_notification(firing()))  # Alertmanager's repeat_interval
    assert repeat.changed and repeat.decision.outcomes == ("duplicate",) and repeat.decision.actions == ()
    clock.now = T0 + stale_after  # silent for half of it since the repeat
    assert (await svc.tick()).outcomes == ()
    clock.now = T0 + stale_after * 1.5 + 1
    with caplog.at_level("WARNING", logger="lanewatch.degrade"):
        assert (await svc.tick()).outcomes == ("expired",)
    assert "not re-sent" in caplog.text and "slow" in caplog.text
    assert controller.sample(names.DEGRADE_ALERTS_TOTAL, outcome="expired") == 1.0
    clock.now += 60 + 120  # past the stable period and the hold
    await svc.tick()
    await svc.reconcile()
    assert controller.adapter.applied[-1][1] == {}
    events = [e.event for _, _, e in controller.store.recent(20)]
    assert events == ["fired", "apply", "escalate", "expired", "restore"]


async def test_future_startsat_is_ignored_counted_and_logged(
    controller: Controller, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="lanewatch.degrade"):
        handled = await controller.service.handle(parse_notification(firing(starts=T0 + 86_400)))
    assert not handled.changed and handled.decision.outcomes == ("future",)
    assert controller.sample(names.DEGRADE_ALERTS_TOTAL, outcome="future") == 1.0
    assert "ahead of this host's clock" in caplog.text


async def test_an_action_the_adapter_cannot_take_is_skipped_audited_and_counted(tmp_path: Path) -> None:
    """A router that can only shift: protecting the fast lane (cap + shed) reaches it as nothing."""
    shifter = RecordingAdapter("shifter", capabilities=frozenset({"shift"}))
    c = Controller(tmp_path / "state", adapter=shifter)
    svc = c.service
    await svc.handle(
        parse_notification(
            encode(body(alert("firing", lane="fast", fingerprint="fa57fa57fa57fa57", starts=T0)))
        )
    )
    await svc.handle(parse_notification(firing()))  # slow shifts 50% to fast: this router can do that
    assert await svc.reconcile()
    assert shifter.applied == [(2, SHIFT50)]  # the fast lane's cap and shed were left out
    skipped = [
        (e.lane, e.action, e.detail["adapter"])
        for _, _, e in c.store.recent(10)
        if e.event == "adapter_skipped"
    ]
    assert sorted(skipped) == [
        ("fast", "cap_max_tokens", "shifter"),
        ("fast", "shed", "shifter"),
        ("slow", "rewrite_model", "shifter"),  # it shifts, with the request's model unchanged
    ]
    tally = names.DEGRADE_ADAPTER_SKIPPED_TOTAL
    assert c.sample(tally, adapter="shifter", action="cap_max_tokens") == 1.0
    assert c.sample(tally, adapter="shifter", action="rewrite_model") == 1.0
    assert c.sample(tally, adapter="shifter", action="shed") == 1.0
    assert c.sample(names.DEGRADE_ADAPTER_SYNCED, adapter="shifter") == 1.0  # it holds all it can hold
    audit = c.store.audit_count()
    assert await svc.reconcile()  # the same skip again: audited and counted once, not per reconcile
    assert c.store.audit_count() == audit and c.sample(tally, adapter="shifter", action="shed") == 1.0
    c.store.close()
