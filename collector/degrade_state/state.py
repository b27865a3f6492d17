"""Per-lane degrade state (the admin API's body, docs/gateway.md) and its application to one request. Pure.

Shared by the gateway and the LiteLLM handler (integrations/litellm/), so both apply one meaning.
The wire model (one lane's degrade, the PUT body's checks) is collector/degrade_state/wire.py,
shared with the degrade controller. The state is declarative: a PUT replaces it whole, a lane
absent from it has no degrade. A PUT carrying a revision older than the last one taken is
refused (`is_stale`), and so is a shift to a lane whose models the gateway does not know
(`shifts_to_unknown_models`): either would send requests somewhere nobody meant them to go.
Applying it to a request routed to lane L: shed when L (or the lane it is shifted to)
sheds the request's class; shift a share of L's requests to L's `shift_to`; cap the
request's work (max_tokens x `n` or `best_of` x prompts) at the smallest cap of L and the
serving lane: max_tokens becomes at most floor(cap / (sequences x prompts)), and a request
whose sequences x prompts alone exceed the cap is refused (`WorkOverCap`).
"""

from __future__ import annotations

import random
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lanewatch.collector.common.errors import ProtocolViolation
from lanewatch.collector.degrade_state.wire import (
    ACTIONS,
    ActionName,
    DegradeError,
    DegradePut,
    LaneDegrade,
    parse_put,
)
from lanewatch.collector.degrade_state.wire import parse_lanes as parse_degrade
from lanewatch.collector.openai_api.request_reading import (
    ReadApi,
    ReadingError,
    read_max_tokens,
    read_tokens,
    work_units,
)

__all__ = [
    "ACTIONS",
    "Decision",
    "DegradeError",
    "DegradePut",
    "DegradeState",
    "LaneDegrade",
    "Shifter",
    "WorkOverCap",
    "cap_max_tokens",
    "decide",
    "is_stale",
    "parse_degrade",
    "parse_put",
    "shifts_to_unknown_models",
]


@dataclass(frozen=True, slots=True)
class DegradeState:
    """The whole degrade state of a gateway, its version (bumped on every change) and the
    sender's revision of it (None: the last PUT gave none)."""

    lanes: Mapping[str, LaneDegrade] = field(default_factory=dict)
    version: int = 0
    revision: int | None = None

    def replaced(self, lanes: Mapping[str, LaneDegrade], revision: int | None = None) -> DegradeState:
        """The state after a PUT of `lanes` at `revision`: same version when the lanes did not change."""
        if dict(lanes) == dict(self.lanes):
            return self if revision == self.revision else DegradeState(self.lanes, self.version, revision)
        return DegradeState(lanes=dict(lanes), version=self.version + 1, revision=revision)

    def to_json(self, lane_order: Sequence[str]) -> dict[str, Any]:
        """The admin API's response body (without the lanes' models, which the gateway adds)."""
        return {
            "lanes": {lane: d.to_json() for lane, d in sorted(self.lanes.items())},
            "lane_order": list(lane_order),
            "version": self.version,
            "revision": self.revision,
        }


def is_stale(state: DegradeState, revision: int | None) -> bool:
    """A PUT at `revision` is older than the state's: refused. Equal is a re-send (taken); a PUT
    without a revision (an operator's) is always taken, and so is any revision after one."""
    return revision is not None and state.revision is not None and revision < state.revision


def shifts_to_unknown_models(
    lanes: Mapping[str, LaneDegrade], known: Container[str]
) -> list[tuple[str, str]]:
    """(lane, shift_to) of each active shift to a lane not in `known` (lanes whose models are known)."""
    return [
        (lane, d.shift_to)
        for lane, d in sorted(lanes.items())
        if d.shift_to is not None and d.shift_percent > 0 and d.shift_to not in known
    ]


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


class WorkOverCap(ProtocolViolation, ValueError):
    """A request whose sequences x prompts alone exceed the cap: no max_tokens brings it under."""

    def __init__(self, cap: int, units: int) -> None:
        super().__init__(
            f"this lane caps a request's work at {cap} tokens for now; its n (or best_of) x prompts "
            f"ask for {units} sequences, more than the cap at one token each: ask for fewer, or retry later"
        )
        self.cap = cap
        self.units = units


def cap_max_tokens(body: dict[str, Any], cap: int, api: ReadApi = "chat", units: int | None = None) -> bool:
    """Bound the request's work by `cap`: clamp the output bound vLLM reads (and the other field, if
    larger) to floor(cap / (sequences x prompts)); True when changed. WorkOverCap when that is 0.

    The body was read already (openai_api/request_reading.py), so its counts are readable; a string
    or float count under the cap is left as it is, vLLM reads it so. `units`: the body's sequences
    x prompts where the caller read them already (openai_api/request_reading.py's `WorkReading`).
    """
    if units is None:
        try:
            units = work_units(body, api)
        except ReadingError:  # a count vLLM refuses (the gateway answered it 400 before): no work to bound
            units = 1
    if units > cap:
        raise WorkOverCap(cap, units)
    cap //= units
    changed = False
    for key in ("max_tokens", "max_completion_tokens"):
        value = _tokens_or_cap(body.get(key), cap)
        if value is not None and value > cap:
            body[key] = cap
            changed = True
    # Both fields are at most `cap` now, so what is left above it is a bound neither field sets:
    # chat's "up to the context length", or completions' default 16. max_tokens then carries the cap.
    bound = read_max_tokens(body, api)
    if bound is None or bound > cap:
        body["max_tokens"] = cap
        changed = True
    return changed


def _tokens_or_cap(value: Any, cap: int) -> int | None:
    try:
        return read_tokens(value, "max_tokens")
    except ReadingError:  # a field vLLM does not read here (completions' max_completion_tokens): capped too
        return cap + 1
