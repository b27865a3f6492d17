"""When the gateway rescues a late request: the deadline, who never is, the bucket, the target's state."""

from __future__ import annotations

import pytest

from lanewatch.collector.degrade_state.state import DegradeState, LaneDegrade
from lanewatch.collector.gateway.settings import RescueConfig
from lanewatch.collector.gateway.upstream.rescue_policy import (
    CUTOFF_GRACE_S,
    RecentTtft,
    RescuePolicy,
    TokenBucket,
)

LANES = ["fast", "mid", "slow"]  # fastest first
SLOS = {"fast": 0.5, "mid": 1.0, "slow": 2.0}


def _policy(**cfg: object) -> RescuePolicy:
    return RescuePolicy(RescueConfig.model_validate(cfg), LANES, SLOS)


def test_each_lane_is_rescued_into_the_next_faster_unless_configured() -> None:
    assert _policy().targets == {"mid": "fast", "slow": "mid"}
    assert _policy(targets={"slow": "fast"}).targets == {"mid": "fast", "slow": "fast"}
    assert _policy(enabled=False).targets == {}


def test_the_deadline_is_the_slo_less_the_targets_recent_p90_less_the_margin_with_a_floor() -> None:
    p = _policy(targets={"slow": "fast"})
    # no TTFT of its own yet: the target's own SLO stands for what it needs
    assert p.plan("slow", "chat", True, False, 0.0).deadline_s == pytest.approx(2.0 - 0.5 - 0.25)  # type: ignore[union-attr]
    for i in range(10):
        p.first_token("fast", 0.05 + 0.01 * i, float(i))
    assert p.target_ttft_s("fast", 10.0) == pytest.approx(0.14)  # nearest-rank p90 of 0.05 .. 0.14
    plan = p.plan("slow", "chat", True, False, 10.0)
    assert plan is not None and plan.deadline_s == pytest.approx(2.0 - 0.14 - 0.25)
    assert plan.cutoff_s == pytest.approx(2.0 + CUTOFF_GRACE_S) and plan.target == "fast"
    for i in range(10):
        p.first_token("fast", 1.9, 20.0 + i)  # a target this slow leaves only the floor
    assert p.deadline_s("slow", "chat", "fast", 2.0, 30.0) == pytest.approx(0.25 * 2.0)
    # a minute later its old TTFTs have aged out: its SLO stands in again
    assert p.target_ttft_s("fast", 100.0) == 0.5


def test_a_deadline_by_hand_wins_per_class_then_per_lane() -> None:
    p = _policy(
        deadlines=[
            {"lane": "slow", "after_s": 1.5},
            {"lane": "slow", "request_class": "chat", "after_s": 0.8},
        ]
    )
    assert p.deadline_s("slow", "chat", "mid", 2.0, 0.0) == 0.8
    assert p.deadline_s("slow", "other", "mid", 2.0, 0.0) == 1.5
    assert p.deadline_s("mid", "chat", "fast", 1.0, 0.0) == pytest.approx(1.0 - 0.5 - 0.25)


@pytest.mark.parametrize(
    ("lane", "request_class", "streamed", "opted_out"),
    [
        ("fast", "chat", True, False),  # the fastest lane: nowhere faster
        ("slow", "batch", True, False),  # an excluded class
        ("slow", "chat", False, False),  # a whole answer: its first token is not observable
        ("slow", "chat", True, True),  # x-lanewatch-rescue: off
    ],
)
def test_who_is_never_rescued(lane: str, request_class: str, streamed: bool, opted_out: bool) -> None:
    assert _policy().plan(lane, request_class, streamed, opted_out, 0.0) is None


def test_a_lane_without_a_ttft_slo_is_never_rescued() -> None:
    p = RescuePolicy(RescueConfig(), LANES, {"fast": 0.5})
    assert p.plan("slow", "chat", True, False, 0.0) is None


def test_every_request_of_the_lane_earns_its_target_a_share_and_each_rescue_spends_one() -> None:
    p = _policy(max_tokens=2, token_ratio=0.5)
    plan = p.plan("slow", "chat", True, False, 0.0)
    assert plan is not None
    state = DegradeState()
    assert p.decide(plan, state, 0.0) is None
    assert p.decide(plan, state, 0.0) is None
    assert p.decide(plan, state, 0.0) == "throttled"  # both tokens spent
    p.plan("slow", "batch", True, False, 0.0)  # never rescued itself, it still earns the share
    assert p.decide(plan, state, 0.0) == "throttled"  # half a token
    p.plan("slow", "chat", False, False, 0.0)
    assert p.decide(plan, state, 0.0) is None


def test_never_into_a_target_degraded_protecting_or_over_its_own_slo() -> None:
    p = _policy()
    plan = p.plan("slow", "chat", True, False, 0.0)
    assert plan is not None and plan.target == "mid"
    shifted = DegradeState({"mid": LaneDegrade(shift_to="fast", shift_percent=50)})
    capped = DegradeState({"mid": LaneDegrade(cap_max_tokens=64)})
    shedding = DegradeState({"mid": LaneDegrade(shed_classes=("batch",))})
    assert p.decide(plan, shifted, 0.0) == "target_degraded"
    assert p.decide(plan, capped, 0.0) == "target_protecting"
    assert p.decide(plan, shedding, 0.0) == "target_protecting"
    for i in range(5):
        p.first_token("mid", 1.5, float(i))  # its p90 over its own 1 s SLO
    assert p.decide(plan, DegradeState(), 5.0) == "target_over_slo"
    assert p.buckets["mid"].tokens == p.cfg.max_tokens  # a decline spends nothing


def test_recent_ttfts_age_out_and_the_bucket_is_bounded() -> None:
    recent = RecentTtft(size=3, horizon_s=10.0)
    assert recent.p90(0.0) is None
    for i, v in enumerate([0.3, 0.1, 0.2, 0.4]):
        recent.add(float(i), v)
    assert recent.count(3.0) == 3 and recent.p90(3.0) == 0.4  # the last three: 0.1, 0.2, 0.4
    assert recent.count(12.5) == 1 and recent.p90(12.5) == 0.4  # those before 2.5 s aged out
    bucket = TokenBucket(2.0, 0.5)
    for _ in range(10):
        bucket.earn()
    assert bucket.tokens == 2.0
    assert bucket.spend() and bucket.spend() and not bucket.spend()
