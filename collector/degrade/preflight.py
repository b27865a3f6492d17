"""What a router would refuse, found at start: every state the policy can ask for, rendered dry.

An adapter that renders its router's file (Envoy's routes, nginx's include) refuses some states
only when it renders them: a lane its file has no route for, a shed class with no match rule, a
class rule that no path of a lane's route can match. Met in an incident, that refusal leaves
the router undegraded. So `degrade serve` and `lanewatch config check` render, for each adapter
and without touching its router, each state the policy can put one lane in (each shift step,
each protect step), each shift beside its faster lane's protection, and every lane degraded at
once, each less the actions the adapter cannot take; any refusal stops the start, naming the
adapter, the state and the adapter's own message. Pure, apart from reading a template.
"""

from __future__ import annotations

from collections.abc import Sequence

from lanewatch.collector.common.errors import ConfigError

from .adapters import AdapterError, AdapterSettings, restrict
from .decision import step_effect
from .policy import Policy
from .state import LaneSpec

__all__ = ["check", "refusals", "rehearsals"]

State = dict[str, LaneSpec]


def rehearsals(policy: Policy) -> list[tuple[str, State]]:
    """(what, lanes) for every state the policy's steps can ask a router to hold, one lane or all."""
    out: list[tuple[str, State]] = []
    protects = [step_effect(policy, "protect", "", i) for i in range(len(policy.protect_steps))]
    for lane in policy.lane_order:
        to = policy.faster_lane(lane)
        for i, percent in enumerate(policy.shift_percents if to is not None else ()):
            shift = step_effect(policy, "shift", lane, i)
            out.append((f"lane {lane} shifted {percent}% to {to}", {lane: shift}))
            for guard in protects:  # a request shifted to `to` obeys `to`'s shed
                what = f"lane {lane} shifted {percent}% to {to} while {to} is protected ({_text(guard)})"
                out.append((what, {lane: shift, str(to): guard}))
        for guard in protects:
            out.append((f"lane {lane} protected ({_text(guard)})", {lane: guard}))
    for i, percent in enumerate(policy.shift_percents):
        for guard in protects:
            every: State = {}
            for lane in policy.lane_order:
                spec = guard
                if policy.faster_lane(lane) is not None:
                    spec = step_effect(policy, "shift", lane, i).merge(guard)
                every[lane] = spec
            out.append(
                (f"every lane degraded at once (shifted {percent}%, protected: {_text(guard)})", every)
            )
    return out


def _text(spec: LaneSpec) -> str:
    parts = [f"cap_max_tokens {spec.cap_max_tokens}"] if spec.cap_max_tokens is not None else []
    if spec.shed_classes:
        parts.append("shed " + ", ".join(spec.shed_classes))
    return "; ".join(parts) or "nothing"


def refusals(policy: Policy, entries: Sequence[AdapterSettings]) -> list[str]:
    """Each refusal of an adapter entry to render a state the policy can ask for, once per message."""
    out: list[str] = []
    states = rehearsals(policy)
    for index, entry in enumerate(entries):
        where = f"degrade.adapters.{index} ({entry.label})"
        try:
            render = entry.renderer()
        except AdapterError as exc:
            out.append(f"{where}: {exc}")
            continue
        if render is None:
            continue
        seen: set[str] = set()
        for what, lanes in states:
            try:
                render(restrict(lanes, entry.capabilities)[0])
            except AdapterError as exc:
                if str(exc) not in seen:
                    seen.add(str(exc))
                    out.append(f"{where} would refuse {what}: {exc}")
    return out


def check(policy: Policy, entries: Sequence[AdapterSettings]) -> None:
    """ConfigError listing every state an adapter would refuse to render; nothing is applied."""
    found = refusals(policy, entries)
    if found:
        head = "a router would refuse a degrade the policy can ask for (rendered at start, nothing applied):"
        raise ConfigError("\n".join([head, *(f"  {line}" for line in found)]))
