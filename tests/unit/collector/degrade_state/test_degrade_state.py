from __future__ import annotations

from typing import Any

import pytest

from lanewatch.collector.degrade_state.state import (
    DegradeError,
    DegradeState,
    LaneDegrade,
    Shifter,
    cap_max_tokens,
    decide,
    is_stale,
    parse_degrade,
    shifts_to_unknown_models,
)

ORDER = ["fast", "mid", "slow"]


def test_parse_round_trip_and_version() -> None:
    body = {
        "lanes": {
            "slow": {"shift_to": "fast", "shift_percent": 50, "cap_max_tokens": 64, "shed_classes": ["batch"]}
        }
    }
    lanes = parse_degrade(body, ORDER)
    state = DegradeState().replaced(lanes)
    assert state.version == 1
    out = state.to_json(ORDER)
    assert out == {**body, "lane_order": ORDER, "version": 1, "revision": None}
    assert state.replaced(parse_degrade(out, ORDER)) is state  # a GET body PUT back changes nothing
    assert state.replaced({}).version == 2


@pytest.mark.parametrize(
    ("held", "sent", "stale"),
    [
        (None, None, False),  # nothing held, nothing sent
        (None, 3, False),  # a first revision (a restarted gateway holds none)
        (5, 6, False),  # a newer one
        (5, 5, False),  # the same one again: the controller's reconcile re-sends it
        (5, 4, True),  # an older one: a late retry or a replay
        (5, 0, True),
        (5, None, False),  # an operator's PUT without a revision is taken
    ],
)
def test_only_an_older_revision_is_stale(held: int | None, sent: int | None, stale: bool) -> None:
    assert is_stale(DegradeState(revision=held), sent) is stale


def test_the_revision_is_held_and_a_resend_keeps_the_version() -> None:
    shift = {"slow": LaneDegrade("fast", 100)}
    state = DegradeState().replaced(shift, 4)
    assert (state.version, state.revision, state.to_json(ORDER)["revision"]) == (1, 4, 4)
    again = state.replaced(shift, 5)  # same lanes at a newer revision: no change of version
    assert (again.version, again.revision) == (1, 5)
    assert again.replaced(shift, 5) is again
    assert again.replaced({}, None).revision is None


def test_shifts_to_lanes_of_unknown_models_are_found() -> None:
    lanes = {
        "slow": LaneDegrade("fast", 100),
        "mid": LaneDegrade("fast", 0),  # no share shifted: nothing goes there
        "fast": LaneDegrade(cap_max_tokens=8),
    }
    assert shifts_to_unknown_models(lanes, {"mid", "slow"}) == [("slow", "fast")]
    assert shifts_to_unknown_models(lanes, {"fast"}) == []


def test_missing_keys_mean_no_action() -> None:
    assert parse_degrade({"lanes": {"mid": {}}}, ORDER) == {"mid": LaneDegrade()}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([], "JSON object"),
        ({"lane": {}}, "unknown keys"),
        ({"lanes": []}, "'lanes' must be an object"),
        ({"lanes": {"turbo": {}}}, "lanes.turbo: unknown lane"),
        ({"lanes": {"slow": {"shift_to": "slow", "shift_percent": 10}}}, "not faster"),
        ({"lanes": {"mid": {"shift_to": "slow", "shift_percent": 10}}}, "not faster"),
        ({"lanes": {"mid": {"shift_to": "nope", "shift_percent": 10}}}, "unknown lane 'nope'"),
        ({"lanes": {"slow": {"shift_to": "fast", "shift_percent": 101}}}, "outside 0..100"),
        ({"lanes": {"slow": {"shift_to": "fast", "shift_percent": -1}}}, "outside 0..100"),
        ({"lanes": {"slow": {"shift_to": "fast", "shift_percent": "50"}}}, "must be a number"),
        ({"lanes": {"slow": {"shift_to": "fast", "shift_percent": True}}}, "must be a number"),
        ({"lanes": {"slow": {"shift_percent": 20}}}, "needs shift_to"),
        ({"lanes": {"slow": {"cap_max_tokens": 0}}}, "< 1"),
        ({"lanes": {"slow": {"cap_max_tokens": 1.5}}}, "integer"),
        ({"lanes": {"slow": {"shed_classes": "batch"}}}, "list"),
        ({"lanes": {"slow": {"shed_classes": ["Batch!"]}}}, "bad class name"),
        ({"lanes": {"slow": {"shift": "fast"}}}, "unknown keys"),
    ],
)
def test_bad_state_is_refused_with_a_reason(body: Any, reason: str) -> None:
    with pytest.raises(DegradeError, match=reason):
        parse_degrade(body, ORDER)


def _state(**lanes: LaneDegrade) -> DegradeState:
    return DegradeState().replaced(lanes)


def test_no_degrade_passes_through() -> None:
    d = decide(_state(fast=LaneDegrade(cap_max_tokens=5)), "slow", "interactive", Shifter())
    assert (d.served_lane, d.cap_max_tokens, d.shed, d.actions) == ("slow", None, False, ())


@pytest.mark.parametrize("percent", [0, 10, 25, 50, 73, 100])
def test_spread_shift_takes_exactly_the_share(percent: int) -> None:
    state = _state(slow=LaneDegrade(shift_to="fast", shift_percent=percent))
    shifter = Shifter("spread")
    served = [decide(state, "slow", "interactive", shifter).served_lane for _ in range(200)]
    assert served.count("fast") == 2 * percent
    # spread evenly: every window of 20 requests holds the share within one request
    for i in range(0, 200, 20):
        assert abs(served[i : i + 20].count("fast") - percent / 5) <= 1


def test_random_shift_is_seeded() -> None:
    state = _state(slow=LaneDegrade(shift_to="fast", shift_percent=30))

    def run(seed: int) -> list[str]:
        shifter = Shifter("random", seed)
        return [decide(state, "slow", "c", shifter).served_lane for _ in range(1000)]

    assert run(7) == run(7)
    assert run(7) != run(8)
    assert 230 <= run(7).count("fast") <= 370


def test_shift_other_lanes_untouched_and_actions() -> None:
    state = _state(slow=LaneDegrade(shift_to="fast", shift_percent=100))
    shifter = Shifter()
    assert decide(state, "mid", "c", shifter).served_lane == "mid"
    d = decide(state, "slow", "c", shifter)
    assert (d.routed_lane, d.served_lane, d.actions) == ("slow", "fast", ("shift",))


def test_shed_matches_class_only() -> None:
    state = _state(slow=LaneDegrade(shed_classes=("batch",)))
    assert decide(state, "slow", "batch", Shifter()).shed
    assert not decide(state, "slow", "interactive", Shifter()).shed


def test_shed_on_the_lane_shifted_to() -> None:
    state = _state(
        slow=LaneDegrade(shift_to="fast", shift_percent=100, cap_max_tokens=100),
        fast=LaneDegrade(cap_max_tokens=16, shed_classes=("batch",)),
    )
    d = decide(state, "slow", "batch", Shifter())
    assert d.shed and d.actions == ("shift", "shed")
    d = decide(state, "slow", "interactive", Shifter())
    assert (d.served_lane, d.cap_max_tokens, d.shed) == ("fast", 16, False)  # the smaller cap


@pytest.mark.parametrize(
    ("body", "changed", "after"),
    [
        ({"max_tokens": 500}, True, {"max_tokens": 64}),
        ({"max_tokens": 10}, False, {"max_tokens": 10}),
        ({"max_tokens": 64}, False, {"max_tokens": 64}),
        ({}, True, {"max_tokens": 64}),  # unset means the whole context: cap it explicitly
        ({"max_tokens": None}, True, {"max_tokens": 64}),
        ({"max_completion_tokens": 900}, True, {"max_completion_tokens": 64}),
        (
            {"max_tokens": 10, "max_completion_tokens": 900},
            True,
            {"max_tokens": 10, "max_completion_tokens": 64},
        ),
    ],
)
def test_cap_rewrite(body: dict[str, Any], changed: bool, after: dict[str, Any]) -> None:
    assert cap_max_tokens(body, 64) is changed
    assert body == after
