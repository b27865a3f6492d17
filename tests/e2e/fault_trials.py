"""Sustained-fault trials on the demo's stack: the slow lane slows down, and the trial measures
how soon its traffic moved, and how soon it came back once the fault cleared.

Shared by the fast guard's e2e tests (through the gateway and through Envoy) and bench/fast_loop.py
(the guard beside the rules alone). Where a request went is told by a `FirstShift`: the gateway's
`x-lanewatch-lane` as the traffic saw it, or Envoy's access-log records.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from lanewatch.collector.cli.app import app
from lanewatch.collector.demo import Stack
from lanewatch.collector.demo.configs import policy_config
from lanewatch.collector.demo.events import lane_actions
from lanewatch.collector.demo.traffic import Timed, Traffic
from lanewatch.collector.guard.settings import GuardConfig

__all__ = [
    "FAULT",
    "HOLD_S",
    "MEDIAN_REACTION_S",
    "MITIGATE",
    "RATE_PER_S",
    "WORST_REACTION_S",
    "Trial",
    "audit_of",
    "envoy_first_shift",
    "evidence_after",
    "fired_after",
    "gateway_first_shift",
    "reactions",
    "records_first_shift",
    "slow_degraded",
    "sustained_fault",
    "until",
]

FAULT = {"queue_delay_s": 3.0}  # every slow-lane request: TTFT over 3 s, past the 2 s SLO
# The guard fires once its evidence floor is met, and the first shifted request is the next
# slow-routed arrival after the apply: both wait on arrivals, so the figures are for this rate.
# The demo's mix at 4/s: half of it (summary, story) routed to the slow lane. More slow-routed
# traffic would fire sooner, but the slow lane's own SLOs break under it: at 6/s (or 4/s with 60 %
# summaries) its TPOT or TTFT breaches without any fault, and the rules degrade it first.
RATE_PER_S = 4.0
MITIGATE = "mitigate"  # the severity of mitigation alerts, the only ones the controller acts on
HOLD_S = float(policy_config()["min_hold_s"])
POLL_S = 0.1
SLOW_CLASSES = frozenset({"summary", "story"})  # the classes the demo routes to the slow lane

FirstShift = Callable[[float], float | None]  # since (Unix) -> when the first shifted request began


@dataclass(frozen=True)
class Trial:
    """One sustained fault: when it began (Unix), seconds to the first shifted request, and seconds
    from the fault's end to the restore."""

    fault_at: float
    to_shift_s: float
    to_restore_s: float


def gateway_first_shift(traffic: Traffic) -> FirstShift:
    """The first slow-routed request the fast lane served on a shift, by the gateway's headers (not one
    the fast lane answered because the slow lane was late for it: the rescue's)."""

    def first(since: float) -> float | None:
        times = [
            s.t
            for s in traffic.history
            if s.t > since and s.routed == "slow" and s.served == "fast" and not s.rescued
        ]
        return min(times) if times else None

    return first


def records_first_shift(records: Path, source: str) -> FirstShift:
    """The first request of a slow-routed class that the fast lane served, by a router's records
    (the lane that served it and when the router took it), for a router that sends no lane header
    the traffic can read the shift by: Envoy, or LiteLLM's handler."""

    def first(since: float) -> float | None:
        if not records.exists():
            return None
        starts = []
        for line in records.read_text().splitlines():
            with contextlib.suppress(ValueError):
                r = json.loads(line)
                if (
                    r.get("source") == source
                    and r.get("lane") == "fast"
                    and r.get("request_class") in SLOW_CLASSES
                    and r["started_at"] > since
                ):
                    starts.append(float(r["started_at"]))
        return min(starts) if starts else None

    return first


def envoy_first_shift(records: Path) -> FirstShift:
    """The first slow-routed request the fast lane served, by Envoy's records (Envoy sends no lane
    header)."""
    return records_first_shift(records, "envoy")


async def slow_degraded(stack: Stack) -> bool:
    """True while the controller holds a degrade of the slow lane."""
    state = await stack.degrade_state()
    return bool(lane_actions((state.get("lanes") or {}).get("slow") or {}))


async def until(predicate: Callable[[], Awaitable[bool]], limit_s: float, what: str) -> float:
    """Seconds until `predicate()` holds; fails past `limit_s`."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if await predicate():
            return time.monotonic() - started
        await asyncio.sleep(POLL_S)
    raise AssertionError(f"{what} did not happen within {limit_s:.0f}s")


async def sustained_fault(
    stack: Stack, first_shift: FirstShift, shift_limit_s: float, restore_margin_s: float
) -> Trial:
    """Fault the slow lane until a shifted request is seen, then clear it and wait for the restore."""
    fault_at = time.time()
    await stack.set_fault("slow", FAULT)

    async def shifted() -> bool:
        return first_shift(fault_at) is not None

    await until(shifted, shift_limit_s, "a shift of the slow lane")
    to_shift = (first_shift(fault_at) or 0.0) - fault_at
    await stack.clear_fault("slow")

    async def restored() -> bool:
        return not await slow_degraded(stack)

    to_restore = await until(restored, HOLD_S + restore_margin_s + 10, "the restore")
    return Trial(fault_at, to_shift, to_restore)


def audit_of(stack: Stack) -> list[dict[str, Any]]:
    """The controller's audit, as `lanewatch degrade status --json` shows it."""
    state_dir = stack.layout.workdir / "degrade-state"
    args = ["degrade", "status", "--state-dir", str(state_dir), "--last", "500", "--json"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    audit: list[dict[str, Any]] = json.loads(done.output)["audit"]
    return audit


def fired_after(audit: list[dict[str, Any]], since: float, lane: str = "slow") -> float | None:
    """Seconds from `since` (Unix) to the controller's first `fired` of `lane` after it."""
    times = [e["at"] for e in audit if e["event"] == "fired" and e["lane"] == lane and e["at"] > since]
    return min(times) - since if times else None


# From the moment the guard's evidence was complete (`evidence_after`) to the first shifted request:
# the guard's tick and report, Alertmanager's group_wait and group_interval (1 s each), the
# controller's apply and the next slow-routed arrival. Measured from the evidence, not the fault:
# on a loaded machine the traffic and the probes that make the evidence come later, and the guard
# cannot judge sooner than the requests it judges.
MEDIAN_REACTION_S = 3.0
WORST_REACTION_S = 5.0
SLOW_TTFT_SLO_S = 2.0  # the slow lane's TTFT SLO in the specs the stacks load (alerts/slos*.yaml)
FIRING_RATIO = 0.5  # their mitigation ratio: the specs declare no `mitigate` windows


def evidence_after(records: Path, since: float, lane: str = "slow") -> float | None:
    """Seconds from `since` (Unix) until a judge with the guard's rule could first have fired on the
    requests the router and the prober sent to `lane`, by their records; None if it never could.

    The rule is GuardConfig's defaults: at least `min_judged` requests judged in the last
    `fire_window_s`, `min_missed` of them missed, more than FIRING_RATIO of them missed. A request
    is judged at its first token, or missed once its age passes the SLO; a record without a TTFT
    (an unstreamed answer, a failure) is left out: no router tells the guard of its first token. A
    request the gateway rescued onto a faster lane is judged by its wait on `lane` (`late_wait_s`).
    The figure is a model, good to a few tenths of a second (the routers report ages in ticks, a
    judged request may reach the guard a little before its record's stamps say). It is what the
    machine gave the guard, not what it should have given: on a loaded machine the traffic and
    the probes start later, and the guard can only be as quick as the requests it judges."""
    rule = GuardConfig()
    slo = SLOW_TTFT_SLO_S
    judged: list[tuple[float, bool]] = []  # (when, missed)
    for line in records.read_text().splitlines() if records.exists() else []:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            r = json.loads(line)
            ttft = r.get("ttft_s")
            if r.get("late_lane") == lane and r.get("lane") != lane:  # rescued: the lane's own wait judges it
                ttft = r.get("late_wait_s")
            elif r.get("lane") != lane:
                continue
            if ttft is not None:
                missed = float(ttft) > slo
                judged.append((float(r["started_at"]) + (slo if missed else float(ttft)), missed))
    judged.sort()
    for i, (when, _) in enumerate(judged):
        if when <= since:
            continue
        window = [missed for at, missed in judged[: i + 1] if at > when - rule.fire_window_s]
        n_missed, n_judged = sum(window), len(window)
        if n_missed >= rule.min_missed and n_judged >= rule.min_judged and n_missed / n_judged > FIRING_RATIO:
            return when - since
    return None


def reactions(to_shift_s: list[float], to_evidence_s: list[float]) -> list[float]:
    """Each trial's seconds from the guard's complete evidence to the first shifted request; fails
    on a trial whose lane never gave the guard its evidence."""
    assert all(e >= 0 for e in to_evidence_s), f"a fault without the evidence to fire on: {to_evidence_s}"
    return [round(s - e, 2) for s, e in zip(to_shift_s, to_evidence_s, strict=True)]


@dataclass(frozen=True)
class FirstTokens:
    """Streamed requests routed to a lane while a fault held it, before the shift: within its SLO or not."""

    met: int
    n: int

    @property
    def share(self) -> float:
        """The share within the SLO (1.0 without any request)."""
        return self.met / self.n if self.n else 1.0


def first_tokens_during(
    timings: Iterable[Timed], windows: Iterable[tuple[float, float]], lane: str = "slow"
) -> dict[bool, FirstTokens]:
    """By whether the client opted out of the rescue: how many of its streamed requests routed to
    `lane` and sent in one of `windows` (Unix from, to) had their first token within the lane's SLO
    (no first token at all is a miss)."""
    spans = list(windows)
    out: dict[bool, list[int]] = {False: [0, 0], True: [0, 0]}
    for t in timings:
        if t.routed != lane or not any(a <= t.sent_at <= b for a, b in spans):
            continue
        tally = out[t.rescue_off]
        tally[1] += 1
        tally[0] += t.ttft_s is not None and t.ttft_s <= SLOW_TTFT_SLO_S
    return {off: FirstTokens(met, n) for off, (met, n) in out.items()}


async def rescue_counts(gateway_url: str) -> dict[str, float]:
    """The gateway's rescues so far by outcome (won, lost, failed, or why none was sent)."""
    from lanewatch.collector.gateway.upstream.rescue_policy import DECLINES
    from lanewatch.exporters.names import GATEWAY_RESCUES_TOTAL
    from tests.e2e.noise_phase import guard_metrics, guard_sample

    text = await guard_metrics(gateway_url)
    outcomes = ("won", "lost", "failed", *DECLINES)
    return {o: n for o in outcomes if (n := guard_sample(text, GATEWAY_RESCUES_TOTAL, outcome=o))}
