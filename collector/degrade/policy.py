"""The degrade policy: which alert degrades which lane how far, and the hysteresis around it.

A policy file is YAML; every key is optional and the default needs no file. The default:

    version: 1
    lane_order: [fast, slow]        # fastest first; the same order as the gateway's lane_order
    shift_target: next              # a shift goes to the next faster lane (or: fastest)
    shift_percents: [50, 100]       # shift steps: the share of the lane's requests sent faster
    protect_steps:                  # on the fastest lane, or on lane convergence
      - cap_max_tokens: 256         # clamp max_tokens (null: no cap)
        shed_classes: [batch]       # refuse these request classes with 429 (x-lanewatch-class)
    convergence_alerts: [LanewatchLaneConvergence]
    alertname_prefix: Lanewatch     # alerts whose name does not start with it are ignored
    severities: []                  # act on these severities only; empty: any
    min_hold_s: 120                 # a step, once taken, stays at least this long
    escalation_cooldown_s: 60       # while an alert keeps firing, the next step after this long
    recovery_stable_s: 60           # every alert on the track resolved this long before restoring
    alert_retention_s: 86400        # resolved alerts are remembered this long (replay guard)
    firing_stale_after_s: 1800      # a firing alert not re-sent this long counts as gone (null: never)

Lane and class names follow the gateway's rules (collector/common/validation.py: a lane is
letters, digits, `_.-`, 1 to 32; a class a lowercase letter, then `a-z0-9_-`, up to 32), so a
policy the gateway would refuse fails at load, naming the field and its line.

An alert on lane L that has a faster lane shifts L to it, step by step while it keeps firing.
An alert on the fastest lane, or a convergence alert (its `lane` is the fast lane of the pair),
protects that lane: it caps max_tokens and sheds the batch class. A lane recovers in one step,
once every alert holding it has resolved, the stable period has passed and the hold is over.
Alertmanager re-sends a firing alert every `repeat_interval` of its route; one that has not come
again for `firing_stale_after_s` no longer holds its lane (its rule was deleted, its resolved
notification lost), so a degrade never outlives every alert that asked for it. Keep that
longer than a few repeat intervals (deploy/alertmanager: 5m).
`deploy/degrade/policy.yaml` is this default, written out; a test keeps the two equal.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lanewatch.collector.common.input_files import load_yaml_model
from lanewatch.collector.common.validation import ClassName, LaneName, check_unique

__all__ = ["DEFAULT_POLICY", "Policy", "PolicySpec", "ProtectStep", "load_policy"]


class ProtectStepSpec(BaseModel):
    """One protection step in the YAML."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cap_max_tokens: int | None = Field(default=256, ge=1)
    shed_classes: list[ClassName] = Field(default_factory=lambda: ["batch"])

    @field_validator("shed_classes")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        return check_unique(value, "request class names")

    @model_validator(mode="after")
    def _does_something(self) -> ProtectStepSpec:
        if self.cap_max_tokens is None and not self.shed_classes:
            raise ValueError("a protect step needs cap_max_tokens or shed_classes")
        return self


class PolicySpec(BaseModel):
    """The policy file as written (version 1); `Policy` is what the controller uses."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    lane_order: list[LaneName] = Field(default_factory=lambda: ["fast", "slow"], min_length=1)
    shift_target: Literal["next", "fastest"] = "next"
    shift_percents: list[int] = Field(default_factory=lambda: [50, 100], min_length=1)
    protect_steps: list[ProtectStepSpec] = Field(default_factory=lambda: [ProtectStepSpec()], min_length=1)
    convergence_alerts: list[str] = Field(default_factory=lambda: ["LanewatchLaneConvergence"])
    alertname_prefix: str = "Lanewatch"
    severities: list[str] = Field(default_factory=list)
    min_hold_s: float = Field(default=120.0, ge=0)
    escalation_cooldown_s: float = Field(default=60.0, ge=0)
    recovery_stable_s: float = Field(default=60.0, ge=0)
    alert_retention_s: float = Field(default=86400.0, gt=0)
    firing_stale_after_s: float | None = Field(default=1800.0, gt=0)

    @field_validator("lane_order")
    @classmethod
    def _lanes(cls, value: list[str]) -> list[str]:
        return check_unique(value, "lane names")

    @field_validator("shift_percents")
    @classmethod
    def _percents(cls, value: list[int]) -> list[int]:
        if any(not 1 <= p <= 100 for p in value):
            raise ValueError("each percent must be within 1..100")
        if any(b <= a for a, b in itertools.pairwise(value)):
            raise ValueError("percents must increase step by step")
        return value


@dataclass(frozen=True)
class ProtectStep:
    """What one protection step tells the router about its lane."""

    cap_max_tokens: int | None
    shed_classes: tuple[str, ...]


@dataclass(frozen=True)
class Policy:
    """The validated policy the decision functions read."""

    lane_order: tuple[str, ...]
    shift_target: Literal["next", "fastest"]
    shift_percents: tuple[int, ...]
    protect_steps: tuple[ProtectStep, ...]
    convergence_alerts: frozenset[str]
    alertname_prefix: str
    severities: frozenset[str]
    min_hold_s: float
    escalation_cooldown_s: float
    recovery_stable_s: float
    alert_retention_s: float
    firing_stale_after_s: float | None

    @classmethod
    def from_spec(cls, spec: PolicySpec) -> Policy:
        """Map the file's model into the policy."""
        return cls(
            lane_order=tuple(spec.lane_order),
            shift_target=spec.shift_target,
            shift_percents=tuple(spec.shift_percents),
            protect_steps=tuple(
                ProtectStep(s.cap_max_tokens, tuple(s.shed_classes)) for s in spec.protect_steps
            ),
            convergence_alerts=frozenset(spec.convergence_alerts),
            alertname_prefix=spec.alertname_prefix,
            severities=frozenset(spec.severities),
            min_hold_s=spec.min_hold_s,
            escalation_cooldown_s=spec.escalation_cooldown_s,
            recovery_stable_s=spec.recovery_stable_s,
            alert_retention_s=spec.alert_retention_s,
            firing_stale_after_s=spec.firing_stale_after_s,
        )

    def faster_lane(self, lane: str) -> str | None:
        """Where a shift of `lane` goes; None on the fastest lane."""
        i = self.lane_order.index(lane)
        if i == 0:
            return None
        return self.lane_order[0] if self.shift_target == "fastest" else self.lane_order[i - 1]

    def with_hysteresis(
        self,
        min_hold_s: float | None = None,
        recovery_stable_s: float | None = None,
        escalation_cooldown_s: float | None = None,
    ) -> Policy:
        """This policy with the given hysteresis values replaced (None keeps the policy's)."""
        return replace(
            self,
            min_hold_s=self.min_hold_s if min_hold_s is None else min_hold_s,
            recovery_stable_s=self.recovery_stable_s if recovery_stable_s is None else recovery_stable_s,
            escalation_cooldown_s=(
                self.escalation_cooldown_s if escalation_cooldown_s is None else escalation_cooldown_s
            ),
        )


DEFAULT_POLICY = Policy.from_spec(PolicySpec())


def load_policy(path: Path | None) -> Policy:
    """The policy in `path`, or the default without one; ConfigError names each bad field and line."""
    if path is None:
        return DEFAULT_POLICY
    return Policy.from_spec(load_yaml_model(path, PolicySpec))
