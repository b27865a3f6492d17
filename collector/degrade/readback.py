"""Each router's read-back beside what the controller wants of it: in sync, diverged or stale. Pure.

`GET /routers` on the controller asks every adapter's `read_back()` and compares what the
router reports it holds with the desired state restricted to what that router can do (the
state its apply is sent). `lanewatch degrade status --controller URL` prints the answer:

- `in_sync`: the router holds exactly the desired lanes;
- `diverged`: it holds other lanes (a hand edit, another writer, an apply that did not take);
- `stale`: it could not be asked (down, refused, no answer in time): what it holds is unknown;
- `unreadable`: the router offers no read-back (the webhook adapter); nothing to compare.

Only the lanes decide: a router at another revision with the same lanes routes the same way
(the next reconcile brings the revision along), so the revision is shown, not judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from lanewatch.collector.degrade_state.wire import LaneDegrade

from .adapters.base import RouterView
from .state import lanes_to_json

__all__ = [
    "DIVERGED_EXIT",
    "RouterReport",
    "Verdict",
    "compare",
    "exit_status",
    "report_lines",
    "reports_json",
    "stale",
]

Verdict = Literal["in_sync", "diverged", "stale", "unreadable"]
DIVERGED_EXIT: Final = 3  # `degrade status --controller`: some router diverges or is stale


@dataclass(frozen=True)
class RouterReport:
    """One router: the lanes the controller wants of it, what it reports it holds, the verdict."""

    adapter: str
    desired: dict[str, LaneDegrade]
    verdict: Verdict
    held: dict[str, LaneDegrade] | None = None  # None: not read (stale or unreadable)
    revision: int | None = None  # the controller revision the router says it holds
    version: int | None = None  # the router's own change counter
    error: str | None = None  # why it is stale


def compare(adapter: str, desired: Mapping[str, LaneDegrade], view: RouterView | None) -> RouterReport:
    """The report of a router that answered (`view`; None: it offers no read-back)."""
    want = {lane: spec for lane, spec in desired.items() if spec.active()}
    if view is None:
        return RouterReport(adapter, want, "unreadable")
    held = {lane: spec for lane, spec in view.lanes.items() if spec.active()}
    verdict: Verdict = "in_sync" if held == want else "diverged"
    return RouterReport(adapter, want, verdict, held, view.revision, view.version)


def stale(adapter: str, desired: Mapping[str, LaneDegrade], error: str) -> RouterReport:
    """The report of a router that could not be asked."""
    want = {lane: spec for lane, spec in desired.items() if spec.active()}
    return RouterReport(adapter, want, "stale", error=error)


def reports_json(revision: int, reports: Sequence[RouterReport]) -> dict[str, Any]:
    """`GET /routers`'s body: the controller's revision and each router's report."""
    routers: dict[str, Any] = {}
    for r in reports:
        routers[r.adapter] = {
            "verdict": r.verdict,
            "desired": lanes_to_json(r.desired)["lanes"],
            "held": lanes_to_json(r.held)["lanes"] if r.held is not None else None,
            "revision": r.revision,
            "version": r.version,
            "error": r.error,
        }
    return {"revision": revision, "routers": routers}


def exit_status(body: Mapping[str, Any]) -> int:
    """0 when every router that can be read holds the desired state, else DIVERGED_EXIT."""
    verdicts = [r.get("verdict") for r in (body.get("routers") or {}).values()]
    return DIVERGED_EXIT if any(v in ("diverged", "stale") for v in verdicts) else 0


def report_lines(body: Mapping[str, Any]) -> list[str]:
    """The text of `GET /routers`'s body: one line per router, desired beside held."""
    lines = [f"routers (the controller is at revision {body.get('revision')}):"]
    routers: Mapping[str, Any] = body.get("routers") or {}
    if not routers:
        lines.append("  no router adapter configured")
    for name, r in sorted(routers.items()):
        want = _lanes_text(r.get("desired") or {})
        verdict = r.get("verdict")
        if verdict == "stale":
            lines.append(f"  router {name}: STALE (cannot be read back: {r.get('error')}); wants {want}")
        elif verdict == "unreadable":
            lines.append(f"  router {name}: no read-back (the router cannot be asked); wants {want}")
        else:
            held = f"holds {_lanes_text(r.get('held') or {})}{_counters(r)}"
            if verdict == "in_sync":
                lines.append(f"  router {name}: in sync: {held}")
            else:
                lines.append(f"  router {name}: DIVERGED: wants {want}; {held}")
    return lines


def _counters(r: Mapping[str, Any]) -> str:
    parts = [f"revision {r['revision']}" if r.get("revision") is not None else "no revision"]
    if r.get("version") is not None:
        parts.append(f"version {r['version']}")
    return f" ({', '.join(parts)})"


def _lanes_text(lanes: Mapping[str, Any]) -> str:
    """`no degrade`, or `lane slow: shift 100% to fast; lane x: cap max_tokens 64` from wire JSON."""
    if not lanes:
        return "no degrade"
    out = []
    for lane, spec in sorted(lanes.items()):
        parts = []
        if spec.get("shift_to") and spec.get("shift_percent"):
            parts.append(f"shift {spec['shift_percent']:g}% to {spec['shift_to']}")
        if spec.get("cap_max_tokens") is not None:
            parts.append(f"cap max_tokens {spec['cap_max_tokens']}")
        if spec.get("shed_classes"):
            parts.append(f"shed {','.join(spec['shed_classes'])}")
        out.append(f"lane {lane}: {', '.join(parts)}")
    return "; ".join(out)
