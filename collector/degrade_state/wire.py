"""The degrade state on the wire: one lane's degrade, its JSON object, and the PUT body's checks.

The gateway's admin API (`GET`/`PUT /admin/degrade`) and the degrade controller both speak
this model: `{"lanes": {lane: {"shift_to", "shift_percent", "cap_max_tokens",
"shed_classes"}}, "revision": n}`. A lane absent from `lanes` has no degrade. `revision` is
the sender's revision of the state (the controller's stored revision; optional): the gateway
refuses one older than the last it took, so a delayed or replayed PUT cannot revert a newer
state. `lane_order`, `version` and `models` appear in a GET body and are accepted (ignored)
in a PUT, so a GET body may be PUT back. Pure; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lanewatch.collector.common.errors import ProtocolViolation
from lanewatch.collector.common.validation import check_class_name

__all__ = [
    "ACTIONS",
    "LANE_KEYS",
    "PUT_KEYS",
    "READ_ONLY_KEYS",
    "ActionName",
    "DegradeError",
    "DegradePut",
    "LaneDegrade",
    "parse_lanes",
    "parse_put",
    "wire_body",
]

ActionName = Literal["shift", "cap_max_tokens", "shed"]
# The router actions, named as the gateway's `x-lanewatch-degraded` header names them.
ACTIONS: tuple[ActionName, ...] = ("shift", "cap_max_tokens", "shed")
LANE_KEYS = frozenset({"shift_to", "shift_percent", "cap_max_tokens", "shed_classes"})
READ_ONLY_KEYS = frozenset({"lane_order", "version", "models"})
PUT_KEYS = frozenset({"lanes", "revision"})


class DegradeError(ProtocolViolation, ValueError):
    """A degrade state that is refused; the message names the bad field."""


@dataclass(frozen=True, slots=True)
class LaneDegrade:
    """One lane's degrade; the default is none. `shed_classes` is kept sorted and unique."""

    shift_to: str | None = None
    shift_percent: float = 0
    cap_max_tokens: int | None = None
    shed_classes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Normal forms, so equal degrades compare equal and render the same JSON.
        object.__setattr__(self, "shed_classes", tuple(sorted(set(self.shed_classes))))
        pct = self.shift_percent
        object.__setattr__(self, "shift_percent", int(pct) if float(pct).is_integer() else float(pct))

    def active(self) -> tuple[ActionName, ...]:
        """The router actions this degrade turns on."""
        on = {
            "shift": self.shift_to is not None and self.shift_percent > 0,
            "cap_max_tokens": self.cap_max_tokens is not None,
            "shed": bool(self.shed_classes),
        }
        return tuple(a for a in ACTIONS if on[a])

    def merge(self, other: LaneDegrade) -> LaneDegrade:
        """Both degrades' actions on one lane (`other` wins where both set one)."""
        shifted = other.shift_to is not None and other.shift_percent > 0
        return LaneDegrade(
            shift_to=other.shift_to if shifted else self.shift_to,
            shift_percent=other.shift_percent if shifted else self.shift_percent,
            cap_max_tokens=other.cap_max_tokens if other.cap_max_tokens is not None else self.cap_max_tokens,
            shed_classes=(*self.shed_classes, *other.shed_classes),
        )

    def to_json(self) -> dict[str, Any]:
        """The admin API's per-lane object."""
        return {
            "shift_to": self.shift_to,
            "shift_percent": self.shift_percent,
            "cap_max_tokens": self.cap_max_tokens,
            "shed_classes": list(self.shed_classes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LaneDegrade:
        """Inverse of `to_json` for trusted input (the controller's own store)."""
        return cls(
            shift_to=data.get("shift_to"),
            shift_percent=data.get("shift_percent", 0),
            cap_max_tokens=data.get("cap_max_tokens"),
            shed_classes=tuple(data.get("shed_classes", ())),
        )


@dataclass(frozen=True, slots=True)
class DegradePut:
    """A validated PUT body: the lanes' degrades and the sender's revision (None: not given)."""

    lanes: dict[str, LaneDegrade]
    revision: int | None = None


def wire_body(lanes: Mapping[str, LaneDegrade], revision: int | None = None) -> dict[str, Any]:
    """The PUT body for these lanes (sorted by name) and, when given, the sender's revision."""
    body: dict[str, Any] = {"lanes": {lane: spec.to_json() for lane, spec in sorted(lanes.items())}}
    if revision is not None:
        body["revision"] = revision
    return body


def parse_put(body: Any, lane_order: Sequence[str]) -> DegradePut:
    """Validate a PUT body into per-lane degrades and a revision; raise DegradeError naming the bad field."""
    if not isinstance(body, dict):
        raise DegradeError("body must be a JSON object with a 'lanes' object")
    unknown = sorted(set(body) - PUT_KEYS - READ_ONLY_KEYS)
    if unknown:
        raise DegradeError(f"unknown keys {unknown}; expected 'lanes' and 'revision'")
    lanes = body.get("lanes")
    if not isinstance(lanes, dict):
        raise DegradeError("'lanes' must be an object of lane name to degrade")
    rank = {lane: i for i, lane in enumerate(lane_order)}
    parsed = {lane: _parse_lane(lane, spec, rank) for lane, spec in lanes.items()}
    return DegradePut(parsed, _parse_revision(body.get("revision")))


def parse_lanes(body: Any, lane_order: Sequence[str]) -> dict[str, LaneDegrade]:
    """Validate a PUT body into per-lane degrades (its revision checked, not returned)."""
    return parse_put(body, lane_order).lanes


def _parse_revision(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DegradeError(f"revision: must be an integer >= 0 or null, not {str(value)[:40]!r}")
    return value


def _parse_lane(lane: str, spec: Any, rank: Mapping[str, int]) -> LaneDegrade:
    where = f"lanes.{lane}"
    if lane not in rank:
        raise DegradeError(f"{where}: unknown lane; lanes: {', '.join(rank)}")
    if not isinstance(spec, dict):
        raise DegradeError(f"{where}: must be an object")
    unknown = sorted(set(spec) - LANE_KEYS)
    if unknown:
        raise DegradeError(f"{where}: unknown keys {unknown}; expected {sorted(LANE_KEYS)}")
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
        shift_percent=percent,
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


def _parse_classes(where: str, classes: Any) -> tuple[str, ...]:
    if not isinstance(classes, list):
        raise DegradeError(f"{where}.shed_classes: must be a list of class names")
    return tuple(_class_name(where, c) for c in classes)


def _class_name(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise DegradeError(f"{where}.shed_classes: bad class name {value!r}: must be a string")
    try:
        return check_class_name(value)
    except ValueError as exc:
        raise DegradeError(f"{where}.shed_classes: {exc}") from None
