from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lanewatch.collector.degrade.decision import FUTURE_TOLERANCE_S, Decision, on_notification, on_tick
from lanewatch.collector.degrade.policy import DEFAULT_POLICY, Policy, PolicySpec
from lanewatch.collector.degrade.state import ControllerState, desired_state
from lanewatch.collector.degrade.webhook import Notification, parse_notification
from tests.alertmanager_bodies import alert, body, encode

T0 = 1_800_000_000.0
BURN = "LanewatchTTFTBurnRate"
CONV = "LanewatchLaneConvergence"
# Small hysteresis so the tables read easily: hold 10 s, stable 5 s, cooldown 3 s.
P = DEFAULT_POLICY.with_hysteresis(min_hold_s=10, recovery_stable_s=5, escalation_cooldown_s=3)
# Firing alerts go stale after 100 s without a repeat (a repeat refreshes them after 10 s).
PS = Policy.from_spec(
    PolicySpec(min_hold_s=10, recovery_stable_s=5, escalation_cooldown_s=3, firing_stale_after_s=100)
)
P3 = Policy.from_spec(
    PolicySpec(
        lane_order=["fast", "mid", "slow"], min_hold_s=10, recovery_stable_s=5, escalation_cooldown_s=3
    )
)


def fp(name: str) -> str:
    return name.encode().hex().rjust(16, "0")[:16]


def fire(
    name: str = "a", lane: str | None = "slow", alertname: str = BURN, starts: float = 0.0
) -> dict[str, Any]:
    return alert("firing", fingerprint=fp(name), lane=lane, alertname=alertname, starts=T0 + starts)


def res(
    name: str = "a", lane: str | None = "slow", alertname: str = BURN, starts: float = 0.0
) -> dict[str, Any]:
    return alert("resolved", fingerprint=fp(name), lane=lane, alertname=alertname, starts=T0 + starts)


def note(*alerts: dict[str, Any]) -> Notification:
    return parse_notification(encode(body(*alerts)))


def view(state: ControllerState) -> dict[str, str]:
    out = {}
    for lane, spec in desired_state(state).items():
        parts = []
        if "shift" in spec.active():
            parts.append(f"shift {spec.shift_to} {spec.shift_percent}")
        if spec.cap_max_tokens is not None:
            parts.append(f"cap {spec.cap_max_tokens}")
        if spec.shed_classes:
            parts.append(f"shed {','.join(spec.shed_classes)}")
        out[lane] = ", ".join(parts)
    return out


def step(policy: Policy, state: ControllerState, t: float, event: object) -> Decision:
    if event == "tick":
        return on_tick(policy, state, T0 + t)
    assert isinstance(event, list)
    return on_notification(policy, state, note(*event), T0 + t)


SHIFT50 = {"slow": "shift fast 50"}
SHIFT100 = {"slow": "shift fast 100"}
PROTECT_FAST = {"fast": "cap 256, shed batch"}

# (name, policy, [(t, event, expected lanes after, expected actions "lane action direction")])
SCENARIOS: list[tuple[str, Policy, list[tuple[float, object, dict[str, str], list[str]]]]] = [
    (
        "shift escalates while firing, restores after resolved + stable + hold",
        P,
        [
            (0, [fire()], SHIFT50, ["slow shift apply"]),
            (2.9, "tick", SHIFT50, []),
            (3, "tick", SHIFT100, ["slow shift escalate"]),
            (9, "tick", SHIFT100, []),  # the last step: nothing further
            (10, [res()], SHIFT100, []),
            (14.9, "tick", SHIFT100, []),  # resolved, but not stable for 5 s yet
            (15, "tick", {}, ["slow shift restore"]),
        ],
    ),
    (
        "the minimum hold outlasts a short alert",
        P,
        [
            (0, [fire()], SHIFT50, ["slow shift apply"]),
            (1, [res()], SHIFT50, []),
            (6, "tick", SHIFT50, []),  # stable, but held until t=10
            (9.9, "tick", SHIFT50, []),
            (10, "tick", {}, ["slow shift restore"]),
        ],
    ),
    (
        "an alert on the fastest lane caps max_tokens and sheds batch",
        P,
        [
            (0, [fire(lane="fast")], PROTECT_FAST, ["fast cap_max_tokens apply", "fast shed apply"]),
            (5, "tick", PROTECT_FAST, []),  # one protect step only
            (6, [res(lane="fast")], PROTECT_FAST, []),
            (11, "tick", {}, ["fast cap_max_tokens restore", "fast shed restore"]),
        ],
    ),
    (
        "lane convergence protects the lane it names, even one with a faster lane",
        P,
        [
            (0, [fire("c", lane="fast", alertname=CONV)], PROTECT_FAST,
             ["fast cap_max_tokens apply", "fast shed apply"]),
            (1, [fire("d", lane="slow", alertname=CONV)], {**PROTECT_FAST, "slow": "cap 256, shed batch"},
             ["slow cap_max_tokens apply", "slow shed apply"]),
        ],
    ),
    (
        "a replayed firing notification acts once, and never escalates by itself",
        P,
        [
            (0, [fire()], SHIFT50, ["slow shift apply"]),
            (0.5, [fire()], SHIFT50, []),
            (4, [fire()], SHIFT50, []),  # past the cooldown: only the clock escalates
            (4, "tick", SHIFT100, ["slow shift escalate"]),
            (5, [fire()], SHIFT100, []),
        ],
    ),
    (
        "a new instance of the alert during the stable period keeps the degrade",
        P,
        [
            (0, [fire(starts=0)], SHIFT50, ["slow shift apply"]),
            (1, [res(starts=0)], SHIFT50, []),
            (4, [fire(starts=4)], SHIFT50, []),
            (5, "tick", SHIFT100, ["slow shift escalate"]),
            (20, "tick", SHIFT100, []),  # still firing: no recovery however long
            (21, [res(starts=4)], SHIFT100, []),
            (25.9, "tick", SHIFT100, []),
            (26, "tick", {}, ["slow shift restore"]),
        ],
    ),
    (
        "resolved before firing (reordered): the late firing is refused",
        P,
        [
            (0, [res()], {}, []),
            (0.1, [fire()], {}, []),
            (5, "tick", {}, []),
        ],
    ),
    (
        "an older instance arriving late changes nothing",
        P,
        [
            (10, [fire(starts=5)], SHIFT50, ["slow shift apply"]),
            (11, [res(starts=5)], SHIFT50, []),
            (12, [fire(starts=0)], SHIFT50, []),  # stale: does not re-arm the track
            (20, "tick", {}, ["slow shift restore"]),
        ],
    ),
    (
        "two alerts hold one lane until both resolve",
        P,
        [
            (0, [fire("a")], SHIFT50, ["slow shift apply"]),
            (1, [fire("b", alertname="LanewatchE2EBurnRate")], SHIFT50, []),
            (2, [res("a")], SHIFT50, []),
            (3, "tick", SHIFT100, ["slow shift escalate"]),
            (12, "tick", SHIFT100, []),
            (13, [res("b", alertname="LanewatchE2EBurnRate")], SHIFT100, []),
            (18, "tick", {}, ["slow shift restore"]),
        ],
    ),
    (
        "alerts the policy does not act on",
        P,
        [
            (0, [fire("x", alertname="KubePodCrashLooping")], {}, []),
            (1, [fire("y", lane=None)], {}, []),
            (2, [fire("z", lane="gpu-lane")], {}, []),
            (3, [res("x", alertname="KubePodCrashLooping")], {}, []),
        ],
    ),
    (
        "one notification, two lanes",
        P,
        [
            (0, [fire("a"), fire("b", lane="fast")], {**SHIFT50, **PROTECT_FAST},
             ["slow shift apply", "fast cap_max_tokens apply", "fast shed apply"]),
            (1, [res("a"), res("b", lane="fast")], {**SHIFT50, **PROTECT_FAST}, []),
            (10, "tick", {}, ["fast cap_max_tokens restore", "fast shed restore", "slow shift restore"]),
        ],
    ),
    (
        "three lanes: shift to the next faster one; shift and protect merge on a lane",
        P3,
        [
            (0, [fire("a", lane="slow")], {"slow": "shift mid 50"}, ["slow shift apply"]),
            (0, [fire("b", lane="mid")], {"slow": "shift mid 50", "mid": "shift fast 50"},
             ["mid shift apply"]),
            (1, [fire("c", lane="mid", alertname=CONV)],
             {"slow": "shift mid 50", "mid": "shift fast 50, cap 256, shed batch"},
             ["mid cap_max_tokens apply", "mid shed apply"]),
        ],
    ),
    (
        "a firing alert Alertmanager stops re-sending (rule deleted, resolved lost) lets go of its lane",
        PS,
        [
            (0, [fire()], SHIFT50, ["slow shift apply"]),
            (3, "tick", SHIFT100, ["slow shift escalate"]),
            (50, [fire()], SHIFT100, []),  # Alertmanager's repeat: still firing, silence counts from here
            (150, "tick", SHIFT100, []),  # silent exactly 100 s: not yet
            (151, "tick", SHIFT100, []),  # expired: the track is clear from now on
            (155.9, "tick", SHIFT100, []),
            (156, "tick", {}, ["slow shift restore"]),
        ],
    ),
    (
        "repeats keep an alert alive however long it fires; a repeat after expiry takes the lane again",
        PS,
        [
            (0, [fire()], SHIFT50, ["slow shift apply"]),
            (3, "tick", SHIFT100, ["slow shift escalate"]),
            *[(t, [fire()], SHIFT100, []) for t in (90, 180, 270)],
            (270.5, "tick", SHIFT100, []),
            (360, "tick", SHIFT100, []),  # last repeat at 270: silent 90 s
            (371, "tick", SHIFT100, []),  # expired at 371
            (372, [fire()], SHIFT100, []),  # the same instance again, before recovery: held on
            (400, "tick", SHIFT100, []),
        ],
    ),
    (
        "without firing_stale_after_s a firing alert holds its lane for ever",
        Policy.from_spec(PolicySpec(min_hold_s=10, recovery_stable_s=5, firing_stale_after_s=None)),
        [
            (0, [fire()], SHIFT50, ["slow shift apply"]),
            (10**6, "tick", SHIFT100, ["slow shift escalate"]),
            (10**7, "tick", SHIFT100, []),
        ],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("name", "policy", "steps"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_policy_table(
    name: str, policy: Policy, steps: list[tuple[float, object, dict[str, str], list[str]]]
) -> None:
    state = ControllerState()
    for t, event, lanes, actions in steps:
        d = step(policy, state, t, event)
        got = [f"{a.lane} {a.action} {a.direction}" for a in d.actions]
        assert (view(d.state), got) == (lanes, actions), f"{name}: at t={t} {event}"
        state = d.state


def test_shift_to_the_fastest_lane_when_told() -> None:
    p = Policy.from_spec(PolicySpec(lane_order=["fast", "mid", "slow"], shift_target="fastest"))
    d = on_notification(p, ControllerState(), note(fire(lane="slow")), T0)
    assert view(d.state) == {"slow": "shift fast 50"}


def test_outcomes_name_what_became_of_each_alert() -> None:
    d1 = on_notification(P, ControllerState(), note(fire("a"), fire("b"), fire("x", lane=None)), T0)
    assert d1.outcomes == ("fired", "joined", "ignored")
    d2 = on_notification(P, d1.state, note(fire("a"), res("b"), res("c"), fire("a", starts=-5)), T0 + 1)
    assert d2.outcomes == ("duplicate", "resolved", "recorded", "stale")
    d3 = on_notification(P, d2.state, note(fire("c")), T0 + 2)
    assert d3.outcomes == ("stale",)  # c's firing came after its resolution


def test_an_expired_alert_is_audited_counted_and_then_forgotten_like_a_resolved_one() -> None:
    d = on_notification(PS, ControllerState(), note(fire("a")), T0)
    expired = on_tick(PS, d.state, T0 + 101)
    assert expired.outcomes == ("expired",)
    assert [(e.event, e.lane, e.detail["silent_s"]) for e in expired.audit] == [("expired", "slow", 101)]
    assert expired.state.alerts[fp("a")].status == "expired"
    assert on_tick(PS, expired.state, T0 + 102).outcomes == ()  # expires once
    late = on_notification(PS, expired.state, note(res("a")), T0 + 103)
    assert late.outcomes == ("recorded",) and late.actions == ()
    kept = on_tick(PS, expired.state, T0 + PS.alert_retention_s)
    assert fp("a") in kept.state.alerts
    assert fp("a") not in on_tick(PS, expired.state, T0 + PS.alert_retention_s + 1).state.alerts


def test_audit_names_alerts_and_actions() -> None:
    d = on_notification(P, ControllerState(), note(fire("a")), T0)
    events = [(e.event, e.lane, e.action) for e in d.audit]
    assert events == [("fired", "slow", None), ("apply", "slow", "shift")]
    assert d.audit[1].detail["to"] == "fast" and d.audit[1].detail["percent"] == 50
    assert d.audit[0].detail["fingerprint"] == fp("a")


def test_severity_filter() -> None:
    p = Policy.from_spec(PolicySpec(severities=["page"]))
    ticket = alert("firing", severity="ticket", starts=T0)
    assert on_notification(p, ControllerState(), note(ticket), T0).outcomes == ("ignored",)
    assert on_notification(p, ControllerState(), note(alert("firing", starts=T0)), T0).outcomes == ("fired",)


def test_resolved_alerts_are_forgotten_after_retention_and_not_before() -> None:
    d = on_notification(P, ControllerState(), note(res("a")), T0)
    assert fp("a") in d.state.alerts
    kept = on_tick(P, d.state, T0 + P.alert_retention_s)
    assert fp("a") in kept.state.alerts
    assert fp("a") not in on_tick(P, d.state, T0 + P.alert_retention_s + 1).state.alerts


def test_decisions_do_not_mutate_their_input() -> None:
    s0 = ControllerState()
    d1 = on_notification(P, s0, note(fire()), T0)
    snapshot = (dict(d1.state.tracks), dict(d1.state.alerts))
    on_notification(P, d1.state, note(res()), T0 + 1)
    on_tick(P, d1.state, T0 + 100)
    assert (d1.state.tracks, d1.state.alerts) == snapshot
    assert s0 == ControllerState()


# ---- properties over random streams of notifications and ticks

INSTANCES = [(n, lane, name, starts) for n in "abc" for lane in ("fast", "slow") for name in (BURN, CONV)
             for starts in (0.0, 30.0)]  # fmt: skip
events = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.floats(0, 20)),
        st.tuples(st.lists(st.tuples(st.sampled_from(INSTANCES), st.booleans()), min_size=1, max_size=3),
                  st.floats(0, 20)),
    ),
    max_size=25,
)  # fmt: skip


def _invariants(policy: Policy, state: ControllerState) -> None:
    for (lane, kind), track in state.tracks.items():
        for f in track.firing:
            rec = state.alerts[f]
            assert (rec.status, rec.lane, rec.kind) == ("firing", lane, kind)
    for f, rec in state.alerts.items():
        if rec.status == "firing":
            assert rec.lane is not None and rec.kind is not None
            assert f in state.tracks[(rec.lane, rec.kind)].firing
    for lane, spec in desired_state(state).items():
        if spec.shift_to is not None:
            assert policy.lane_order.index(spec.shift_to) < policy.lane_order.index(lane)
            assert spec.shift_percent in policy.shift_percents


def _instances(state: ControllerState) -> dict[str, tuple[str, float]]:
    return {f: (rec.status, rec.starts_at) for f, rec in state.alerts.items()}


@settings(max_examples=150, deadline=None)
@given(events, st.sampled_from([P, PS.with_hysteresis(min_hold_s=10)]))
def test_replays_never_act_and_state_stays_consistent(
    stream: list[tuple[Any, float]], policy: Policy
) -> None:
    state, now = ControllerState(), T0
    for event, dt in stream:
        now += dt
        if event == "tick":
            state = on_tick(policy, state, now).state
        else:
            alerts = [
                (fire if firing else res)(n, lane=lane, alertname=name, starts=starts)
                for (n, lane, name, starts), firing in event
            ]
            n = note(*alerts)
            first = on_notification(policy, state, n, now)
            again = on_notification(policy, first.state, n, now + 0.5)  # Alertmanager's retry or a replay
            assert again.actions == () and again.state.tracks == first.state.tracks
            # a replay may only refresh when a firing alert was last heard of
            assert _instances(again.state) == _instances(first.state)
            state = first.state
        _invariants(policy, state)


def test_a_big_group_joining_a_big_track_is_linear_not_quadratic() -> None:
    import time

    held = ControllerState()
    for part in range(2):  # a notification holds 10,000 alerts at most
        group_of = note(*(fire(f"h{part}-{i}") for i in range(10_000)))
        held = on_notification(P, held, group_of, T0).state
    group = note(*(fire(f"g{i}") for i in range(3500)))
    start = time.perf_counter()
    d = on_notification(P, held, group, T0 + 1)
    elapsed = time.perf_counter() - start
    assert len(d.state.tracks[("slow", "shift")].firing) == 23_500
    assert set(d.outcomes) == {"joined"}
    # linear: 0.1-0.5 s here (a garbage collection of the big state included); a new frozenset
    # per joining alert (3,500 copies of ~20,000 fingerprints) took 9 s
    assert elapsed < 3.0, elapsed


def test_resolving_and_refiring_in_one_notification_keeps_the_track_consistent() -> None:
    held = on_notification(P, ControllerState(), note(fire("a"), fire("b")), T0).state
    d = on_notification(P, held, note(res("a"), res("b"), fire("c")), T0 + 1)
    track = d.state.tracks[("slow", "shift")]
    assert track.firing == frozenset({fp("c")}) and track.clear_since is None  # cleared, then held again
    d2 = on_notification(P, held, note(res("a"), res("b")), T0 + 1)
    assert d2.state.tracks[("slow", "shift")].firing == frozenset()
    assert d2.state.tracks[("slow", "shift")].clear_since == T0 + 1


def test_a_startsat_far_in_the_future_is_refused_and_cannot_pin_a_degrade() -> None:
    d = on_notification(P, ControllerState(), note(fire("a", starts=3600.0)), T0)
    assert d.outcomes == ("future",) and d.state == ControllerState() and d.actions == ()
    # Were it kept, the real instance's firing and resolution would look older and be dropped as stale.
    d = on_notification(P, d.state, note(fire("a")), T0 + 1)
    assert d.outcomes == ("fired",)
    d = on_notification(P, d.state, note(res("a")), T0 + 2)
    assert d.outcomes == ("resolved",)
    assert d.state.tracks[("slow", "shift")].firing == frozenset()


def test_clock_skew_within_the_tolerance_is_accepted() -> None:
    d = on_notification(P, ControllerState(), note(fire("a", starts=FUTURE_TOLERANCE_S - 1)), T0)
    assert d.outcomes == ("fired",)
    d = on_notification(P, ControllerState(), note(res("b", starts=FUTURE_TOLERANCE_S + 1)), T0)
    assert d.outcomes == ("future",)  # a resolved one too: it would detach a real instance
