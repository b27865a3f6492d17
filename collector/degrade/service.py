"""The controller: decisions committed to the store first, then applied through the adapters.

Order matters for safety: a notification's decision is committed (state and audit in one
transaction) before the webhook is answered, and only then applied to routers. A crash
before the commit loses nothing (Alertmanager retries a post without a 2xx); a crash after
it is repaired on restart, which re-applies the stored state. `run` is the periodic driver:
it owns the clock, ticks the time-driven steps and reconciles the adapters. Each adapter
applies on its own (applier.py), within its own deadline, so a router that hangs holds back
only itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .adapters import Adapter, AdapterError, restrict
from .adapters.base import REWRITE_MODEL
from .applier import APPLY_TIMEOUT_S, Applier, Attempt
from .audit_diagnosis import Why
from .decision import FUTURE_TOLERANCE_S, Decision, on_notification, on_tick
from .metrics import DegradeMetrics
from .policy import Policy
from .readback import RouterReport, compare, stale
from .state import AuditEntry, ControllerState, LaneSpec, desired_state
from .store import StateStore
from .webhook import Notification

__all__ = ["DegradeService", "Handled"]

log = logging.getLogger("lanewatch.degrade")
READ_BACK_TIMEOUT_S = 10.0  # one router's read-back for `GET /routers`; past it the router is stale
DIAGNOSIS_RETRY_S = 15.0  # a diagnosis that found nothing looks again this much later, once


@dataclass(frozen=True)
class Handled:
    """What became of one notification: the decision, whether it changed the state, the revision."""

    decision: Decision
    changed: bool
    revision: int


class DegradeService:
    """Holds the state, serializes decisions, and keeps the adapters in line with it."""

    def __init__(
        self,
        policy: Policy,
        store: StateStore,
        adapters: Sequence[Adapter],
        metrics: DegradeMetrics,
        clock: Callable[[], float] = time.time,
        why: Why | None = None,
        diagnosis_retry_s: float = DIAGNOSIS_RETRY_S,
        apply_timeout_s: float = APPLY_TIMEOUT_S,
    ) -> None:
        self.policy = policy
        self._why = why
        self.diagnosis_retry_s = diagnosis_retry_s  # a second look when the first found nothing; 0: none
        self._explaining: set[asyncio.Task[None]] = set()
        self._store = store
        self._adapters = list(adapters)
        self._metrics = metrics
        self._clock = clock
        snapshot = store.load()
        self._state = snapshot.state
        self._revision = snapshot.revision
        self._held: dict[str, dict[str, LaneSpec] | None] = {a.name: None for a in self._adapters}
        self._failing: dict[str, bool] = {a.name: False for a in self._adapters}
        self._skipped: dict[str, frozenset[tuple[str, str]]] = {a.name: frozenset() for a in self._adapters}
        # Per adapter, for `degrade status`: its last apply and last error, kept across restarts.
        self._reports: dict[str, dict[str, Any]] = store.adapters()
        self._appliers = {a.name: Applier(a, self._settle, apply_timeout_s) for a in self._adapters}
        self._lock = asyncio.Lock()
        self._kick = asyncio.Event()
        metrics.watch(policy, self._view)

    @property
    def state(self) -> ControllerState:
        """The current state."""
        return self._state

    @property
    def revision(self) -> int:
        """The stored revision of the current state."""
        return self._revision

    def synced(self) -> dict[str, bool]:
        """Per adapter: did its last apply succeed with the lanes the current state wants of it."""
        want = desired_state(self._state)
        return {a.name: self._held[a.name] == restrict(want, a.capabilities)[0] for a in self._adapters}

    def _view(self) -> tuple[ControllerState, int, dict[str, bool]]:
        return self._state, self._revision, self.synced()

    def resume(self) -> None:
        """Note a restart that found a degrade in progress; the first reconcile re-applies it."""
        lanes = desired_state(self._state)
        if lanes:
            detail = {"revision": self._revision, "lanes": sorted(lanes)}
            self._store.append([AuditEntry(self._clock(), "resumed", None, None, detail)])
            log.info("resumed revision %d with degraded lanes %s", self._revision, sorted(lanes))
        self._kick.set()

    async def handle(self, notification: Notification) -> Handled:
        """Decide on one notification and commit the result; raises if the store fails."""
        async with self._lock:
            now = self._clock()
            decision = on_notification(self.policy, self._state, notification, now)
            changed = self._commit(decision, now)
            revision = self._revision
        if future := decision.outcomes.count("future"):
            log.warning(
                "ignored %d alert(s) whose startsAt is more than %d s ahead of this host's clock "
                "(clock skew, or a forged notification)",
                future,
                FUTURE_TOLERANCE_S,
            )
        for outcome, count in Tally(decision.outcomes).items():
            self._metrics.alerts.labels(outcome).inc(count)
        return Handled(decision, changed, revision)

    async def tick(self) -> Decision:
        """Take the steps that the clock allows now."""
        async with self._lock:
            now = self._clock()
            decision = on_tick(self.policy, self._state, now)
            self._commit(decision, now)
        for outcome, count in Tally(decision.outcomes).items():
            self._metrics.alerts.labels(outcome).inc(count)
        return decision

    def _commit(self, decision: Decision, now: float) -> bool:
        if decision.state == self._state:
            return False
        self._revision = self._store.commit(decision.state, decision.audit, now)
        self._state = decision.state
        for e in decision.audit:
            if e.event == "expired":
                log.warning(
                    "alert %s on lane %s not re-sent for %s s: it no longer holds the lane "
                    "(was its rule deleted, or its resolved notification lost?)",
                    e.detail.get("alertname"),
                    e.lane,
                    e.detail.get("silent_s"),
                )
        for a in decision.actions:
            self._metrics.transitions.labels(a.lane, a.action, a.direction).inc()
            log.info("%s %s on lane %s: %s", a.direction, a.action, a.lane, a.detail)
        if decision.actions:
            self._kick.set()
            self._explain(decision, self._revision)
        return True

    def _explain(self, decision: Decision, revision: int) -> None:
        """Diagnose each lane this decision degraded further, beside the apply (never before it)."""
        if self._why is None:
            return
        acted: dict[str, list[str]] = {}
        for a in decision.actions:
            if a.direction != "restore":
                acted.setdefault(a.lane, []).append(a.action)
        for lane, actions in sorted(acted.items()):
            task = asyncio.get_running_loop().create_task(self._diagnosis(self._why, lane, actions, revision))
            self._explaining.add(task)
            task.add_done_callback(self._explaining.discard)

    async def _diagnosis(self, why: Why, lane: str, actions: list[str], revision: int) -> None:
        detail = await self._diagnose(why, lane)
        if not detail.get("findings") and "error" not in detail and self.diagnosis_retry_s:
            # Acted on seconds of evidence (the fast guard): Prometheus may not hold enough of the
            # fault yet to explain it. One more look later, while the lane is still degraded.
            first = {"revision": revision, "actions": actions, **detail}
            self._store_audit(AuditEntry(self._clock(), "diagnosis", lane, None, first))
            await asyncio.sleep(self.diagnosis_retry_s)
            if lane not in desired_state(self._state):
                return
            detail = {**await self._diagnose(why, lane), "second_look": True}
        findings = detail.get("findings") or []
        if findings:
            log.info("lane %s: top finding %s (%s)", lane, findings[0]["check"], findings[0]["title"])
        elif "error" in detail:
            log.warning("lane %s: no diagnosis: %s", lane, detail["error"])
        entry = {"revision": revision, "actions": actions, **detail}
        self._store_audit(AuditEntry(self._clock(), "diagnosis", lane, None, entry))

    async def _diagnose(self, why: Why, lane: str) -> dict[str, Any]:
        try:
            return dict(await why(lane))
        except Exception as exc:  # a diagnosis is a note: it never touches the degrade itself
            log.exception("diagnosis of lane %s failed", lane)
            return {"error": str(exc)[:300] or type(exc).__name__}

    async def explained(self) -> None:
        """Wait for the diagnoses under way (tests, shutdown)."""
        while self._explaining:
            await asyncio.gather(*self._explaining, return_exceptions=True)

    async def read_back(self, timeout_s: float = READ_BACK_TIMEOUT_S) -> list[RouterReport]:
        """Ask every router what it holds, concurrently, beside what the current state wants of it."""
        want = desired_state(self._state)
        asks = (self._read_back(a, restrict(want, a.capabilities)[0], timeout_s) for a in self._adapters)
        return list(await asyncio.gather(*asks))

    async def _read_back(
        self, adapter: Adapter, desired: dict[str, LaneSpec], timeout_s: float
    ) -> RouterReport:
        try:
            async with asyncio.timeout(timeout_s):
                view = await adapter.read_back()
        except TimeoutError:
            return stale(adapter.name, desired, f"no answer within {timeout_s:g} s")
        except AdapterError as exc:
            return stale(adapter.name, desired, str(exc))
        except Exception as exc:  # a bug in one adapter's read-back must not hide the others
            log.exception("adapter %s's read-back raised unexpectedly", adapter.name)
            return stale(adapter.name, desired, type(exc).__name__)
        return compare(adapter.name, desired, view)

    async def reconcile(self) -> bool:
        """Apply the current state through every adapter, each on its own and within its deadline;
        True when all of them hold it."""
        return all(await asyncio.gather(*self._hand_out()))

    def _hand_out(self) -> list[asyncio.Future[bool]]:
        """Give every adapter's applier the current state; each future says how its apply went."""
        self._kick.clear()
        revision, desired = self._revision, desired_state(self._state)
        out = []
        for adapter in self._adapters:
            lanes, skipped = restrict(desired, adapter.capabilities)
            self._note_skipped(adapter, skipped, revision)
            out.append(self._appliers[adapter.name].want(lanes, revision))
        return out

    def _settle(self, attempt: Attempt) -> None:
        """Record how one apply went: the adapter's report, its held lanes, the audit and metrics."""
        name, lanes, revision = attempt.adapter, attempt.lanes, attempt.revision
        if attempt.error is not None:
            self._failed(name, revision, attempt.error, attempt.reason or "unexpected")
            return
        if self._held[name] != lanes or self._failing[name]:
            self._note(name, applied_revision=revision, applied_at=self._clock(), lanes=_lanes_json(lanes))
        self._held[name] = lanes
        if self._failing[name]:
            self._failing[name] = False
            log.info("adapter %s recovered: applied revision %d", name, revision)
            self._audit("adapter_ok", {"adapter": name, "revision": revision})

    def _note_skipped(self, adapter: Adapter, skipped: Sequence[tuple[str, str]], revision: int) -> None:
        """Audit, count and log each action the adapter cannot take, once while it stays wanted."""
        now = frozenset(skipped)
        for lane, action in sorted(now - self._skipped[adapter.name]):
            self._metrics.adapter_skipped.labels(adapter.name, action).inc()
            log.warning("adapter %s cannot %s: skipped on lane %s", adapter.name, action, lane)
            reason = "not supported by the router"
            if action == REWRITE_MODEL:
                reason = (
                    "the router shifts with the body unchanged: the faster lane must serve the lane's model"
                )
            detail = {"adapter": adapter.name, "revision": revision, "reason": reason}
            self._store_audit(AuditEntry(self._clock(), "adapter_skipped", lane, action, detail))
        self._skipped[adapter.name] = now

    def _note(self, name: str, **changes: Any) -> None:
        """Record what an adapter did, for `degrade status`; a store failure only logs."""
        report = {**self._reports.get(name, {}), **changes}
        self._reports[name] = report
        try:
            self._store.note_adapter(name, report)
        except Exception:  # status is a report: it must never stop the loop that keeps routers right
            log.exception("could not record adapter %s's status", name)

    def _failed(self, name: str, revision: int, exc: Exception, reason: str) -> None:
        self._metrics.adapter_failures.labels(name, reason).inc()
        if not self._failing[name] or self._reports.get(name, {}).get("error") != str(exc):
            self._note(name, error=str(exc), error_at=self._clock(), error_revision=revision)
        self._held[name] = None
        if not self._failing[name]:
            self._failing[name] = True
            log.warning("adapter %s failed to apply revision %d: %s", name, revision, exc)
            detail = {"adapter": name, "revision": revision, "error": str(exc), "reason": reason}
            self._audit("adapter_failed", detail)

    def _audit(self, event: str, detail: dict[str, object]) -> None:
        self._store_audit(AuditEntry(self._clock(), event, None, None, dict(detail)))

    def _store_audit(self, entry: AuditEntry) -> None:
        try:
            self._store.append([entry])
        except Exception:  # an audit note must never stop the loop that keeps routers right
            log.exception("could not append %s to the audit log", entry.event)

    async def run(self, stop: asyncio.Event, tick_s: float, reconcile_s: float) -> None:
        """The periodic driver: tick and reconcile until `stop` is set."""
        await asyncio.gather(self._tick_loop(stop, tick_s), self._reconcile_loop(stop, reconcile_s))

    async def _tick_loop(self, stop: asyncio.Event, tick_s: float) -> None:
        while not stop.is_set():
            try:
                await self.tick()
            except Exception:
                log.exception("tick failed; state kept as it was")
            await _wait_any(stop, None, tick_s)

    async def _reconcile_loop(self, stop: asyncio.Event, reconcile_s: float) -> None:
        # Hands the state out and waits for none of the applies: each applier retries its own
        # failures sooner than the interval (0.5 s, doubling up to it).
        for applier in self._appliers.values():
            applier.retry_max_s = reconcile_s
        while not stop.is_set():
            self._hand_out()
            await _wait_any(stop, self._kick, reconcile_s)

    async def shutdown(self) -> None:
        """Release the adapters and the store."""
        for task in list(self._explaining):  # a diagnosis still waiting on Prometheus is dropped
            task.cancel()
        await asyncio.gather(*self._explaining, return_exceptions=True)
        for applier in self._appliers.values():  # an apply still under way is cancelled
            await applier.close()
        for adapter in self._adapters:
            await adapter.shutdown()
        self._store.close()


def _lanes_json(lanes: dict[str, LaneSpec]) -> dict[str, Any]:
    return {lane: spec.to_json() for lane, spec in sorted(lanes.items())}


async def _wait_any(a: asyncio.Event, b: asyncio.Event | None, seconds: float) -> None:
    """Wait until either event is set or `seconds` pass."""
    waits = [asyncio.ensure_future(a.wait())]
    if b is not None:
        waits.append(asyncio.ensure_future(b.wait()))
    _, pending = await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
