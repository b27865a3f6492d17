"""The fast guard end to end on injected clocks: verdicts in, postable alerts out."""

from __future__ import annotations

import itertools
from typing import Any

from lanewatch.collector.guard.alert import GuardAlert
from lanewatch.collector.guard.decide import GuardRule
from lanewatch.collector.guard.guard import FastGuard
from lanewatch.collector.progress.inflight import InFlight, Progress
from lanewatch.collector.record.timing import RequestTiming, Source

WALL0 = 1_700_000_000.0
RESEND_S = 5.0


class Clock:
    """A monotonic clock the test moves; wall time follows it from WALL0."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def wall(self) -> float:
        return WALL0 + self.t


def _alert(lane: str, threshold_s: float) -> GuardAlert:
    labels = (("alertname", "LanewatchMitigate"), ("lane", lane), ("slo", "ttft"))
    return GuardAlert(lane, "ttft", threshold_s, labels, (("runbook_url", "rb"),))


def _guard(clock: Clock, record_sources: tuple[str, ...] = ("envoy", "litellm")) -> FastGuard:
    return FastGuard(
        [_alert("fast", 0.5), _alert("slow", 5.0)],
        GuardRule(),
        record_sources=record_sources,
        resend_s=RESEND_S,
        generator_url="http://collector/",
        clock=clock,
        wall=clock.wall,
    )


_ids = itertools.count(1)


def _events(n: int, age_s: float, lane: str = "fast") -> list[Progress]:
    return [Progress(next(_ids), lane, age_s, True) for _ in range(n)]


def _fire(guard: FastGuard) -> list[dict[str, Any]]:
    guard.progress("gw", _events(5, 2.0))
    return guard.evaluate()


def test_lanes_are_those_guarded() -> None:
    assert _guard(Clock()).lanes == ["fast", "slow"]


def test_nothing_is_due_without_verdicts() -> None:
    clock = Clock()
    guard = _guard(clock)
    assert guard.evaluate() == []
    guard.progress("gw", _events(10, 0.1))  # all met
    assert guard.evaluate() == []


def test_misses_fire_one_postable_alert() -> None:
    clock = Clock()
    guard = _guard(clock)
    due = _fire(guard)
    assert len(due) == 1
    body = due[0]
    assert body["labels"] == {
        "alertname": "LanewatchMitigate",
        "lane": "fast",
        "slo": "ttft",
        "source": "guard",
    }
    assert body["startsAt"] == "2023-11-14T22:15:00.000Z"  # WALL0 + 100 s
    assert body["endsAt"] == "2023-11-14T22:15:15.000Z"  # three re-sends ahead
    assert body["generatorURL"] == "http://collector/"
    assert "5 of 5" in body["annotations"]["summary"]


def test_after_a_good_send_it_is_re_sent_only_every_resend_s() -> None:
    clock = Clock()
    guard = _guard(clock)
    due = _fire(guard)
    guard.sent(due, ok=True)
    assert guard.posts["ok"] == 1
    clock.t += 1.0
    assert guard.evaluate() == []
    clock.t += RESEND_S - 1.0 - 0.01
    assert guard.evaluate() == []
    clock.t += 0.01
    again = guard.evaluate()
    assert len(again) == 1
    assert again[0]["startsAt"] == due[0]["startsAt"]  # the same firing
    assert again[0]["endsAt"] == "2023-11-14T22:15:20.000Z"  # moved on with the wall clock
    guard.sent(again, ok=True)
    assert guard.evaluate() == []


def test_a_failed_send_is_retried_next_evaluate() -> None:
    clock = Clock()
    guard = _guard(clock)
    due = _fire(guard)
    guard.sent(due, ok=False)
    assert guard.posts["failed"] == 1
    clock.t += 0.25
    retry = guard.evaluate()
    assert len(retry) == 1
    assert retry[0]["labels"]["lane"] == "fast"
    guard.sent(retry, ok=True)
    clock.t += 0.25
    assert guard.evaluate() == []


def test_resolve_sends_one_alert_ending_now_then_nothing() -> None:
    clock = Clock()
    guard = _guard(clock)
    fired = _fire(guard)
    guard.sent(fired, ok=True)
    clock.t += 20.0  # past the resolve window, the misses gone from it
    guard.progress("gw", _events(8, 0.1))
    due = guard.evaluate()
    assert len(due) == 1
    assert due[0]["startsAt"] == fired[0]["startsAt"]
    assert due[0]["endsAt"] == "2023-11-14T22:15:20.000Z"  # WALL0 + 120 s: now
    guard.sent(due, ok=True)
    for _ in range(3):
        clock.t += RESEND_S
        assert guard.evaluate() == []
    view = {v.lane: v for v in guard.views()}["fast"]
    assert not view.firing
    assert view.changed_at == WALL0 + 120.0


def test_a_firing_lane_holds_and_keeps_re_sending_without_evidence() -> None:
    clock = Clock()
    guard = _guard(clock)
    guard.sent(_fire(guard), ok=True)
    for _ in range(10):
        clock.t += RESEND_S
        due = guard.evaluate()
        assert len(due) == 1
        guard.sent(due, ok=True)
    assert {v.lane: v for v in guard.views()}["fast"].firing


def test_events_of_an_unguarded_lane_are_ignored() -> None:
    clock = Clock()
    guard = _guard(clock)
    guard.progress("gw", _events(10, 99.0, lane="other"))
    assert guard.evaluate() == []
    assert guard.judge.unknown_lane == 10


def _record(source: Source, ttft_s: float) -> RequestTiming:
    return RequestTiming(source=source, target="t", lane="fast", request_class="c", model="m", ttft_s=ttft_s)


def test_record_judges_only_its_record_sources() -> None:
    clock = Clock()
    guard = _guard(clock)
    for source in ("probe", "tap", "litellm"):
        guard.record(_record(source, 2.0))
    guard.record(_record("envoy", 0.1))
    view = {v.lane: v for v in guard.views()}["fast"]
    assert view.verdicts == {"met": 1, "missed": 1}


def test_record_sources_are_configurable() -> None:
    clock = Clock()
    guard = _guard(clock, record_sources=("tap",))
    for _ in range(5):
        guard.record(_record("tap", 2.0))
        guard.record(_record("envoy", 2.0))
    assert guard.verdicts[("fast", "missed")] == 5
    assert len(guard.evaluate()) == 1


def test_a_watched_table_is_read_on_evaluate() -> None:
    clock = Clock()
    guard = _guard(clock)
    table = InFlight()
    t0 = clock.t
    first: list[float] = []
    table.start("fast", t0, lambda: None)  # waits throughout
    table.start("fast", t0, lambda: first[0] if first else None)
    guard.watch("prober", table)
    clock.t += 0.3  # under the threshold: neither is judged yet
    assert guard.evaluate() == []
    assert {v.lane: v for v in guard.views()}["fast"].verdicts == {"met": 0, "missed": 0}
    first.append(t0 + 0.4)  # a TTFT of 0.4 s
    clock.t += 0.3  # 0.6 s: the waiting one missed
    guard.evaluate()
    assert {v.lane: v for v in guard.views()}["fast"].verdicts == {"met": 1, "missed": 1}
    clock.t += 1.0
    guard.evaluate()  # judged once: its later ages add nothing
    assert {v.lane: v for v in guard.views()}["fast"].verdicts == {"met": 1, "missed": 1}


def test_watched_tables_can_fire() -> None:
    clock = Clock()
    guard = _guard(clock)
    table = InFlight()
    for _ in range(5):
        table.start("fast", clock.t, lambda: None)
    guard.watch("prober", table)
    clock.t += 1.0
    due = guard.evaluate()
    assert [d["labels"]["lane"] for d in due] == ["fast"]


def test_views_report_state_and_verdict_counts() -> None:
    clock = Clock()
    guard = _guard(clock)
    guard.progress("gw", _events(3, 0.1) + _events(5, 2.0) + _events(2, 1.0, lane="slow"))
    guard.evaluate()
    views = {v.lane: v for v in guard.views()}
    assert set(views) == {"fast", "slow"}
    fast, slow = views["fast"], views["slow"]
    assert fast.slo == "ttft"
    assert fast.firing
    assert fast.changed_at == WALL0 + 100.0
    assert (fast.judged, fast.missed) == (8, 5)
    assert fast.verdicts == {"met": 3, "missed": 5}
    assert not slow.firing
    assert slow.changed_at is None
    assert (slow.judged, slow.missed) == (2, 0)
    assert slow.verdicts == {"met": 2, "missed": 0}
