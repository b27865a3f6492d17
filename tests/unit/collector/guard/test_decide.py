"""When the guard fires and resolves: windows, evidence floor, ratios, and no flapping."""

from __future__ import annotations

from lanewatch.collector.guard.decide import BUCKET_S, GuardRule, LaneState, Verdicts, step

RULE = GuardRule()  # fire 3 s, resolve 10 s, >=4 judged, >=3 missed, fire >0.5, resolve <=0.25
KEEP = max(RULE.fire_window_s, RULE.resolve_window_s)


def _verdicts(*items: tuple[float, bool]) -> Verdicts:
    verdicts = Verdicts(KEEP)
    for at, missed in items:
        verdicts.add(at, missed)
    return verdicts


def _fired(at: float) -> LaneState:
    return LaneState(True, at, 4, 4)


def test_verdicts_count_within_the_window() -> None:
    verdicts = _verdicts((0.0, True), (0.1, False), (1.0, True), (5.0, False))
    assert verdicts.counts(5.0, 3.0) == (1, 0)
    assert verdicts.counts(5.0, 10.0) == (4, 2)
    assert verdicts.counts(30.0, 10.0) == (0, 0)  # all trimmed


def test_does_not_fire_below_min_judged() -> None:
    verdicts = _verdicts(*[(1.0, True)] * 3)  # 3 judged, 3 missed
    state = step(RULE, LaneState(), verdicts, 1.0)
    assert not state.firing
    assert (state.judged, state.missed) == (3, 3)


def test_does_not_fire_below_min_missed() -> None:
    rule = GuardRule(min_judged=2, min_missed=3)
    state = step(rule, LaneState(), _verdicts((1.0, True), (1.0, True)), 1.0)
    assert not state.firing


def test_does_not_fire_at_the_fire_ratio() -> None:
    verdicts = _verdicts(*[(1.0, True)] * 3, *[(1.0, False)] * 3)  # 3 of 6: exactly 0.5
    state = step(RULE, LaneState(), verdicts, 1.0)
    assert not state.firing
    assert (state.judged, state.missed) == (6, 3)


def test_does_not_fire_below_the_fire_ratio() -> None:
    verdicts = _verdicts(*[(1.0, True)] * 4, *[(1.0, False)] * 6)
    assert not step(RULE, LaneState(), verdicts, 1.0).firing


def test_fires_when_all_pass() -> None:
    verdicts = _verdicts(*[(1.0, True)] * 4, *[(1.0, False)] * 3)  # 4 of 7 > 0.5
    state = step(RULE, LaneState(), verdicts, 1.5)
    assert state == LaneState(True, 1.5, 7, 4)


def test_a_single_slow_request_never_fires() -> None:
    verdicts = Verdicts(KEEP)
    verdicts.add(0.0, True)
    state = LaneState()
    t = 0.0
    while t < 20.0:
        state = step(RULE, state, verdicts, t)
        assert not state.firing
        t += BUCKET_S


def test_a_lane_with_one_slow_request_every_10_s_never_fires() -> None:
    verdicts = Verdicts(KEEP)
    state = LaneState()
    for i in range(int(120 / BUCKET_S)):
        t = i * BUCKET_S
        if i % int(10 / BUCKET_S) == 0:
            verdicts.add(t, True)
        state = step(RULE, state, verdicts, t)
        assert not state.firing


def test_old_verdicts_leave_the_fire_window() -> None:
    verdicts = _verdicts(*[(0.0, True)] * 3)
    verdicts.add(4.0, True)  # the 4th miss comes after the first 3 left the 3 s window
    state = step(RULE, LaneState(), verdicts, 4.0)
    assert not state.firing
    assert (state.judged, state.missed) == (1, 1)


def test_does_not_resolve_before_resolve_window_since_firing() -> None:
    verdicts = _verdicts(*[(5.0 + 0.1 * i, False) for i in range(40)])
    state = step(RULE, _fired(0.0), verdicts, 9.9)
    assert state.firing
    assert state.since == 0.0
    assert (state.judged, state.missed) == (40, 0)
    assert step(RULE, _fired(0.0), verdicts, 10.0).firing is False  # once settled


def test_holds_with_no_evidence() -> None:
    state = _fired(0.0)
    verdicts = Verdicts(KEEP)
    for t in (10.0, 20.0, 100.0, 1000.0):
        state = step(RULE, state, verdicts, t)
        assert state.firing
        assert state.since == 0.0
        assert (state.judged, state.missed) == (0, 0)


def test_does_not_resolve_below_min_judged() -> None:
    verdicts = _verdicts(*[(15.0, False)] * 3)
    assert step(RULE, _fired(0.0), verdicts, 15.0).firing


def test_does_not_resolve_above_resolve_ratio() -> None:
    verdicts = _verdicts(*[(15.0, True)] * 3, *[(15.0, False)] * 8)  # 3 of 11 > 0.25
    state = step(RULE, _fired(0.0), verdicts, 15.0)
    assert state.firing
    assert (state.judged, state.missed) == (11, 3)


def test_resolves_on_good_evidence() -> None:
    verdicts = _verdicts(*[(15.0, True)] * 2, *[(15.0, False)] * 6)  # 2 of 8: exactly 0.25
    state = step(RULE, _fired(0.0), verdicts, 15.0)
    assert state == LaneState(False, 15.0, 8, 2)


def test_resolve_counts_the_longer_window() -> None:
    # misses 8 s ago are out of the fire window but inside the resolve window
    verdicts = _verdicts(*[(7.0, True)] * 4, *[(15.0, False)] * 4)
    state = step(RULE, _fired(0.0), verdicts, 15.0)
    assert state.firing
    assert (state.judged, state.missed) == (8, 4)


def test_a_15_s_blip_fires_once_and_resolves_once() -> None:
    verdicts = Verdicts(KEEP)
    state = LaneState()
    changes: list[tuple[float, bool]] = []
    next_request = 0.0
    for i in range(int(90 / BUCKET_S)):
        t = i * BUCKET_S
        while next_request <= t:  # 3 requests a second, all missed during [5 s, 20 s)
            verdicts.add(next_request, 5.0 <= next_request < 20.0)
            next_request += 1 / 3
        after = step(RULE, state, verdicts, t)
        if after.firing != state.firing:
            changes.append((t, after.firing))
        state = after
    assert [firing for _, firing in changes] == [True, False]
    fired_at, resolved_at = changes[0][0], changes[1][0]
    assert 5.0 < fired_at <= 7.0  # within seconds of the blip
    assert resolved_at >= fired_at + RULE.resolve_window_s
    assert resolved_at > 20.0
    assert not state.firing
