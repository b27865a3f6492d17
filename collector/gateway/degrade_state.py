"""Per-lane degrade state (the admin API's body, docs/gateway.md) and its application to one request. Pure.

The state is declarative: a PUT replaces it whole, a lane absent from it has no degrade.
Applying it to a request routed to lane L: shed when L (or the lane it is shifted to)
sheds the request's class; shift a share of L's requests to L's `shift_to`; cap
max_tokens at the smallest cap of L and the serving lane.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ACTIONS",
    "Decision",
    "DegradeError",
    "DegradeState",
    "LaneDegrade",
    "Shifter",
    "cap_max_tokens",
    "decide",
    "parse_degrade",
]

ActionName = Literal["shift", "cap_max_tokens", "shed"]
ACTIONS: tuple[ActionName, ...] = ("shift", "cap_max_tokens", "shed")
_LANE_KEYS = frozenset({"shift_to", "shift_percent", "cap_max_tokens", "shed_classes"})
_READ_ONLY_KEYS = frozenset({"lane_order", "version"})  # a GET body may be PUT back as it is
_CLASS = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class DegradeError(ValueError):
    """A degrade state the gateway refuses; the message is the 400's reason."""


@dataclass(frozen=True, slots=True)
class LaneDegrade:
    """One lane's degrade; the default is none."""

    shift_to: str | None = None
    shift_percent: float = 0.0
    cap_max_tokens: int | None = None
    shed_classes: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        """The admin API's per-lane object."""
        pct = self.shift_percent
        return {
            "shift_to": self.shift_to,
            "shift_percent": int(pct) if float(pct).is_integer() else pct,
            "cap_max_tokens": self.cap_max_tokens,
            "shed_classes": sorted(self.shed_classes),
        }


@dataclass(frozen=True, slots=True)
class DegradeState:
    """The whole degrade state of a gateway and its version (bumped on every change)."""

    lanes: Mapping[str, LaneDegrade] = field(default_factory=dict)
    version: int = 0

    def replaced(self, lanes: Mapping[str, LaneDegrade]) -> DegradeState:
        """The state after a PUT of `lanes`: same version when nothing changed."""
        if dict(lanes) == dict(self.lanes):
            return self
        return DegradeState(lanes=dict(lanes), version=self.version + 1)

    def to_json(self, lane_order: Sequence[str]) -> dict[str, Any]:
        """The admin API's response body."""
        return {
            "lanes": {lane: d.to_json() for lane, d in sorted(self.lanes.items())},
            "lane_order": list(lane_order),
            "version": self.version,
        }


def parse_degrade(body: Any, lane_order: Sequence[str]) -> dict[str, LaneDegrade]:
    """Validate a PUT body into per-lane degrades; raise DegradeError naming the bad field."""
    if not isinstance(body, dict):
        raise DegradeError("body must be a JSON object with a 'lanes' object")
    unknown = sorted(set(body) - {"lanes"} - _READ_ONLY_KEYS)
    if unknown:
        raise DegradeError(f"unknown keys {unknown}; expected 'lanes'")
    lanes = body.get("lanes")
    if not isinstance(lanes, dict):
        raise DegradeError("'lanes' must be an object of lane name to degrade")
    rank = {lane: i for i, lane in enumerate(lane_order)}
    return {lane: _parse_lane(lane, spec, rank) for lane, spec in lanes.items()}


def _parse_lane(lane: str, spec: Any, rank: Mapping[str, int]) -> LaneDegrade:
    where = f"lanes.{lane}"
    if lane not in rank:
        raise DegradeError(f"{where}: unknown lane; lanes: {', '.join(rank)}")
    if not isinstance(spec, dict):
        raise DegradeError(f"{where}: must be an object")
    unknown = sorted(set(spec) - _LANE_KEYS)
    if unknown:
        raise DegradeError(f"{where}: unknown keys {unknown}; expected {sorted(_LANE_KEYS)}")
    shift_to = spec.get("shift_to")
    percent = spec.get("shift_percent", 0)
    if shift_to is not None:
        if not isinstance(shift_to, str) or shift_to not in rank:
            raise DegradeError(f"{where}.shift_to: unknown lane {shift_to!r}")
        if rank[shift_to] >= rank[lane]:
            raise DegradeError(f"{where}.shift_to: {shift_to!r} is not faster than {lane!r} by lane_order")
    if isinstance(percent, bool) or not isinstance(percent, int | float) or not math.isfinite(percent):
        raise DegradeError(f"{where}.shift_percent: must be a number 0..100")
    if not 0 <= percent <= 100:
        raise DegradeError(f"{where}.shift_percent: {percent} is outside 0..100")
    if percent > 0 and shift_to is None:
        raise DegradeError(f"{where}.shift_percent: {percent} needs shift_to")
    return LaneDegrade(
        shift_to=shift_to,
        shift_percent=float(percent),
        cap_max_tokens=_parse_cap(where, spec.get("cap_max_tokens")),
        shed_classes=_parse_classes(where, spec.get("shed_classes", [])),
    )


def _parse_cap(where: str, cap: Any) -> int | None:
    if cap is None:
        return None
    if isinstance(cap, bool) or not isinstance(cap, int):
        raise DegradeError(f"{where}.cap_max_tokens: must be an integer >= 1 or null")
    if cap < 1:
        raise DegradeError(f"{where}.cap_max_tokens: {cap} is < 1")
    return cap


def _parse_classes(where: str, classes: Any) -> frozenset[str]:
    if not isinstance(classes, list):
        raise DegradeError(f"{where}.shed_classes: must be a list of class names")
    for c in classes:
        if not isinstance(c, str) or not _CLASS.match(c):
            raise DegradeError(f"{where}.shed_classes: bad class name {c!r}")
    return frozenset(classes)


class Shifter:
    """Decides which of a lane's requests a shift takes: exactly N% spread evenly, or a seeded draw."""

    def __init__(self, mode: Literal["spread", "random"] = "spread", seed: int = 0) -> None:
        self._mode = mode
        self._rng = random.Random(seed)
        self._credit: dict[str, float] = {}

    def take(self, lane: str, percent: float) -> bool:
        """True when this request of `lane` is to be shifted at `percent`."""
        if percent <= 0:
            return False
        if percent >= 100:
            return True
        if self._mode == "random":
            return self._rng.random() * 100.0 < percent
        # Error diffusion: after n requests, floor(n * percent / 100) were shifted.
        credit = self._credit.get(lane, 0.0) + percent
        taken = credit >= 100.0
        self._credit[lane] = credit - 100.0 if taken else credit
        return taken


@dataclass(frozen=True, slots=True)
class Decision:
    """What degrade does to one request: where it is served, its cap, whether it is shed."""

    routed_lane: str
    served_lane: str
    cap_max_tokens: int | None = None
    shed: bool = False
    actions: tuple[ActionName, ...] = ()  # shift and shed; the cap counts once it changed the body


def decide(state: DegradeState, lane: str, request_class: str, shifter: Shifter) -> Decision:
    """Apply the degrade state to a request routed to `lane` of class `request_class`."""
    own = state.lanes.get(lane)
    if own is None:
        return Decision(lane, lane)
    if request_class in own.shed_classes:
        return Decision(lane, lane, shed=True, actions=("shed",))
    served = lane
    if own.shift_to is not None and shifter.take(lane, own.shift_percent):
        served = own.shift_to
    there = state.lanes.get(served) if served != lane else None
    if there is not None and request_class in there.shed_classes:
        return Decision(lane, served, shed=True, actions=("shift", "shed"))
    caps = [d.cap_max_tokens for d in (own, there) if d is not None and d.cap_max_tokens is not None]
    cap = min(caps) if caps else None
    actions: tuple[ActionName, ...] = ("shift",) if served != lane else ()
    return Decision(lane, served, cap_max_tokens=cap, actions=actions)


def cap_max_tokens(body: dict[str, Any], cap: int) -> bool:
    """Clamp the body's max_tokens (and max_completion_tokens) to `cap`; True when it changed."""
    changed = False
    present = [k for k in ("max_tokens", "max_completion_tokens") if body.get(k) is not None]
    for key in present:
        value = body[key]
        if not isinstance(value, int) or isinstance(value, bool) or value > cap:
            body[key] = cap
            changed = True
    if not present:  # unset means "up to the context length": the cap must be explicit
        body["max_tokens"] = cap
        changed = True
    return changed
