"""The timeline waits on what happened, with deadlines so a run always ends."""

from __future__ import annotations

import pytest

from lanewatch.collector.demo.timeline import DEFAULT_FAULT, Plan, Step, next_step

PLAN = Plan(duration_s=200, warmup_s=20, show_shift_s=15, max_fault_s=90, tail_s=15)
STORY = [
    (20.0, "fault_injected"),
    (31.0, "alert_firing"),
    (32.0, "degrade_applied"),
    (47.0, "fault_cleared"),
    (80.0, "alert_resolved"),
    (86.0, "degrade_restored"),
]


def upto(t: float) -> list[tuple[float, str]]:
    return [(at, kind) for at, kind in STORY if at <= t]


@pytest.mark.parametrize(
    ("elapsed", "step"),
    [
        (0.0, Step.WAIT),
        (19.9, Step.WAIT),
        (20.0, Step.INJECT),
        (25.0, Step.WAIT),  # fault on, no alert yet
        (40.0, Step.WAIT),  # degraded, shift shown for 8 s of 15
        (47.0, Step.CLEAR),
        (60.0, Step.WAIT),  # cleared, still degraded
        (90.0, Step.WAIT),  # restored 4 s ago
        (101.0, Step.FINISH),  # restored 15 s ago
    ],
)
def test_the_story_step_by_step(elapsed: float, step: Step) -> None:
    happened = upto(elapsed - 1e-9) if step in (Step.INJECT, Step.CLEAR) else upto(elapsed)
    assert next_step(PLAN, elapsed, happened) == step


def test_the_fault_clears_after_max_fault_s_when_nothing_degrades() -> None:
    happened = [(20.0, "fault_injected")]
    assert next_step(PLAN, 109.0, happened) == Step.WAIT
    assert next_step(PLAN, 110.0, happened) == Step.CLEAR
    cleared = [*happened, (110.0, "fault_cleared")]
    assert next_step(PLAN, 124.0, cleared) == Step.WAIT
    assert next_step(PLAN, 125.0, cleared) == Step.FINISH  # nothing to restore


def test_a_degrade_from_before_the_fault_does_not_count_as_the_shift() -> None:
    happened = [(5.0, "degrade_applied"), (20.0, "fault_injected")]
    assert next_step(PLAN, 50.0, happened) == Step.WAIT


def test_a_lane_degraded_again_after_its_restore_holds_the_finish() -> None:
    again = [*STORY, (90.0, "degrade_applied")]
    assert next_step(PLAN, 150.0, again) == Step.WAIT
    assert next_step(PLAN, 170.0, [*again, (155.0, "degrade_restored")]) == Step.FINISH


def test_a_lane_still_degraded_holds_the_finish_when_another_lane_was_restored() -> None:
    # The shifted traffic breached the fast lane too: its cap came and went, the slow lane's shift stays.
    two = [*STORY[:3], (35.0, "degrade_applied"), (47.0, "fault_cleared"), (60.0, "degrade_restored")]
    assert next_step(PLAN, 100.0, two) == Step.FINISH  # as far as the kinds tell
    assert next_step(PLAN, 100.0, two, degraded=True) == Step.WAIT
    assert next_step(PLAN, 200.0, two, degraded=True) == Step.FINISH  # the duration still ends it


def test_a_restore_before_the_clear_counts_from_the_clear() -> None:
    early = [*STORY[:3], (40.0, "alert_resolved"), (45.0, "degrade_restored"), (47.0, "fault_cleared")]
    assert next_step(PLAN, 61.0, early) == Step.WAIT
    assert next_step(PLAN, 62.0, early) == Step.FINISH


def test_the_duration_ends_any_run() -> None:
    assert next_step(PLAN, 200.0, upto(60.0)) == Step.FINISH
    assert next_step(Plan(duration_s=10, warmup_s=20), 10.0, []) == Step.FINISH


def test_the_default_fault_breaks_the_slow_lane_ttft_slo() -> None:
    assert PLAN.lane == "slow"
    assert DEFAULT_FAULT["queue_delay_s"] > 2.0  # the demo spec's slow-lane TTFT threshold
