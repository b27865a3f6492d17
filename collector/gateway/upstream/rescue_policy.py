"""When the gateway rescues a late request, into which lane, and how often: pure.

A streamed request on lane L whose first token has not come by its deadline is sent again to L's
rescue target, a faster lane (upstream/rescue.py runs the race). The deadline is L's TTFT SLO less
what the target needs for a first token (the p90 of its own recent attempts' TTFT, each from when
it was sent) less a margin, and never under a floor (a share of the SLO); the policy can set it
by hand per lane and class. A request is planned for rescue at admission (`RescuePolicy.plan`)
and the rescue is decided at its deadline (`RescuePolicy.decide`), against the state then:

- never into a lane that is itself degraded (shifted away), protecting (capping or shedding), or
  over its own TTFT SLO by its recent attempts;
- never past the target's token bucket, after gRPC's `retryThrottling`: each request served on a
  lane that rescues into the target adds `token_ratio` (up to `max_tokens`), each rescue takes
  one, so rescues are at most that share of the lane's requests plus the bucket's size, however
  sick the lanes are;
- never for a class the policy excludes, a whole (non-streamed) answer, a request that opts out,
  or a lane without a TTFT SLO or a faster lane.

Times are the caller's (perf_counter seconds).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from lanewatch.collector.degrade_state.state import DegradeState
from lanewatch.collector.gateway.settings import RescueConfig

__all__ = ["CUTOFF_GRACE_S", "Decline", "Plan", "RecentTtft", "RescuePolicy", "TokenBucket"]

Decline = Literal["throttled", "target_degraded", "target_protecting", "target_over_slo"]
DECLINES: tuple[Decline, ...] = ("throttled", "target_degraded", "target_protecting", "target_over_slo")
# The late attempt of a rescued request is given up this long after its SLO passed without a first
# token: by then it has missed, and its wait says so (the guard and the rules judge the lane by it).
CUTOFF_GRACE_S = 0.1
_MIN_SAMPLES = 5  # recent TTFTs before their p90 stands for the target; fewer: the target's own SLO


@dataclass(frozen=True, slots=True)
class Plan:
    """One request's rescue, armed at admission: where it would go, and when."""

    lane: str  # the lane the request waits on
    target: str  # the faster lane it would be sent to
    deadline_s: float  # seconds from the request's start: no first token by then, rescue
    cutoff_s: float  # seconds from the start: the late attempt, if it lost the race, is given up


class TokenBucket:
    """Rescue tokens of one target lane: `ratio` earned per request planned, one spent per rescue."""

    __slots__ = ("max_tokens", "ratio", "tokens")

    def __init__(self, max_tokens: float, ratio: float) -> None:
        self.max_tokens, self.ratio = max_tokens, ratio
        self.tokens = max_tokens

    def earn(self) -> None:
        """One more request that could be rescued into the lane."""
        self.tokens = min(self.max_tokens, self.tokens + self.ratio)

    def spend(self) -> bool:
        """Take a token for one rescue; False when the bucket has none."""
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class RecentTtft:
    """A lane's TTFTs of the last `horizon_s`, each from when its attempt was sent (at most `size`):
    their p90, recomputed only when they change. Old ones age out, so a lane judged slow once is
    not judged by that forever when nothing new reaches it."""

    __slots__ = ("_horizon_s", "_p90", "_values")

    def __init__(self, size: int = 32, horizon_s: float = 60.0) -> None:
        self._values: deque[tuple[float, float]] = deque(maxlen=size)  # (when, ttft)
        self._horizon_s = horizon_s
        self._p90: float | None = None

    def add(self, now: float, ttft_s: float) -> None:
        """One attempt's first token came at `now`, `ttft_s` after it was sent."""
        self._values.append((now, ttft_s))
        self._p90 = None

    def count(self, now: float) -> int:
        """How many TTFTs are recent at `now`."""
        self._age(now)
        return len(self._values)

    def p90(self, now: float) -> float | None:
        """The 90th percentile (nearest rank) of the recent TTFTs, None without any."""
        self._age(now)
        if self._p90 is None and self._values:
            ordered = sorted(v for _, v in self._values)
            self._p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        return self._p90

    def _age(self, now: float) -> None:
        values = self._values
        while values and values[0][0] < now - self._horizon_s:
            values.popleft()
            self._p90 = None


class RescuePolicy:
    """The gateway's rescue plans: each lane's target and TTFT SLO, the buckets, the recent TTFTs."""

    def __init__(self, cfg: RescueConfig, lane_order: Sequence[str], slos: Mapping[str, float]) -> None:
        self.cfg = cfg
        self.slos = dict(slos)  # lane -> its TTFT SLO threshold (seconds)
        self.targets = _targets(cfg, lane_order) if cfg.enabled else {}
        self.buckets = {t: TokenBucket(cfg.max_tokens, cfg.token_ratio) for t in set(self.targets.values())}
        self.recent = {lane: RecentTtft() for lane in lane_order}
        self._excluded = frozenset(cfg.exclude_classes)
        self._by_hand = {(d.lane, d.request_class): d.after_s for d in cfg.deadlines}

    def plan(self, lane: str, request_class: str, streamed: bool, opted_out: bool, now: float) -> Plan | None:
        """The request's rescue plan, or None when it is never rescued; every request of a lane with a
        target earns that target's bucket its share."""
        target = self.targets.get(lane)
        slo = self.slos.get(lane)
        if target is None or slo is None:
            return None
        self.buckets[target].earn()  # every request of the lane: rescues are a share of its traffic
        if not streamed or opted_out or request_class in self._excluded:
            return None
        return Plan(
            lane, target, self.deadline_s(lane, request_class, target, slo, now), slo + CUTOFF_GRACE_S
        )

    def deadline_s(self, lane: str, request_class: str, target: str, slo: float, now: float) -> float:
        """How long a request of `lane` and `request_class` waits for a first token before its rescue."""
        by_hand = self._by_hand.get((lane, request_class), self._by_hand.get((lane, None)))
        if by_hand is not None:
            return by_hand
        needs = self.target_ttft_s(target, now)
        return max(self.cfg.floor_ratio * slo, slo - needs - self.cfg.margin_s)

    def target_ttft_s(self, target: str, now: float) -> float:
        """What the target needs for a first token: its recent p90, else its own SLO, else nothing."""
        recent = self.recent.get(target)
        if recent is not None and recent.count(now) >= _MIN_SAMPLES:
            return recent.p90(now) or 0.0
        return self.slos.get(target, 0.0)

    def decide(self, plan: Plan, degrade: DegradeState, now: float) -> Decline | None:
        """At the deadline: None to rescue now (a token spent), else why not."""
        there = degrade.lanes.get(plan.target)
        if there is not None and there.shift_to is not None and there.shift_percent > 0:
            return "target_degraded"
        if there is not None and (there.cap_max_tokens is not None or there.shed_classes):
            return "target_protecting"
        recent = self.recent.get(plan.target)
        own_slo = self.slos.get(plan.target)
        if own_slo is not None and recent is not None and recent.count(now) >= _MIN_SAMPLES:
            p90 = recent.p90(now)
            if p90 is not None and p90 > own_slo:
                return "target_over_slo"
        if not self.buckets[plan.target].spend():
            return "throttled"
        return None

    def first_token(self, lane: str, ttft_s: float, now: float) -> None:
        """An attempt on `lane` had its first token at `now`, `ttft_s` after it was sent."""
        recent = self.recent.get(lane)
        if recent is not None:
            recent.add(now, ttft_s)


def _targets(cfg: RescueConfig, lane_order: Sequence[str]) -> dict[str, str]:
    """Each lane's rescue target: as configured, else the next faster lane (none for the fastest)."""
    out = {slower: faster for faster, slower in itertools.pairwise(lane_order)}
    out.update(cfg.targets)
    return out
