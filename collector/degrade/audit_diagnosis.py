"""Why the controller acted: a diagnosis of the alert's lane from Prometheus, for the audit log.

It runs on a thread of its own, beside the apply, under one deadline: a slow or down Prometheus
costs an audit note ("timed out", "cannot query"), never a delayed or failed degrade. The thread
is a daemon, so a Prometheus that hangs past the deadline cannot hold up the controller's exit,
and a lane has one at most: while it still hangs, the lane's next action gets a note at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from lanewatch.collector.diagnose import SloTargets, Thresholds, diagnose
from lanewatch.collector.diagnose.gather import DiagnoseInputError, Sources, gather
from lanewatch.collector.diagnose.model import Finding, LaneDiagnosis

__all__ = ["TOP_FINDINGS", "DiagnosisContext", "PrometheusWhy", "Why", "finding_detail"]

TOP_FINDINGS = 3  # findings kept per audit entry: the audit log stays small
TOP_EVIDENCE = 4  # breached signals kept per finding

Why = Callable[[str], Awaitable[dict[str, Any]]]  # lane -> audit detail; never raises


@dataclass(frozen=True)
class DiagnosisContext:
    """What anchors a diagnosis: the lanes' SLOs, the fast/slow lane pairs and the thresholds."""

    slos: Mapping[str, SloTargets] = field(default_factory=dict)
    pairs: tuple[tuple[str, str], ...] = ()
    thresholds: Thresholds = field(default_factory=Thresholds)


class PrometheusWhy:
    """Diagnoses one lane from one Prometheus within a deadline; the result is an audit detail."""

    def __init__(
        self,
        url: str,
        context: DiagnosisContext,
        *,
        window: str = "5m",
        timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url, self.window, self.timeout_s = url, window, timeout_s
        self._context = context
        self._transport = transport
        self._running: dict[str, threading.Thread] = {}  # at most one thread per lane, even past its deadline

    async def __call__(self, lane: str) -> dict[str, Any]:
        """The audit detail: the top findings of `lane`, or a note saying why there are none."""
        started = time.monotonic()
        source = {"source": f"prometheus {self.url} over {self.window}"}
        busy = self._running.get(lane)
        if busy is not None and busy.is_alive():  # a hung Prometheus never piles up threads
            return {**source, "error": "an earlier diagnosis of this lane still waits on Prometheus"}
        loop = asyncio.get_running_loop()
        done: asyncio.Future[dict[str, Any]] = loop.create_future()

        def work() -> None:
            try:
                result = self._diagnose(lane)
            except Exception as exc:  # whatever goes wrong becomes the note, never the degrade's problem
                result = {"error": _error(exc)}
            if not loop.is_closed():
                loop.call_soon_threadsafe(_settle, done, result)

        thread = self._running[lane] = threading.Thread(
            target=work, name=f"lanewatch-why-{lane}", daemon=True
        )
        thread.start()
        try:
            detail = await asyncio.wait_for(asyncio.shield(done), self.timeout_s)
        except TimeoutError:
            detail = {"error": f"Prometheus did not answer within {self.timeout_s:g} s"}
        return {**source, **detail, "elapsed_s": round(time.monotonic() - started, 3)}

    def _diagnose(self, lane: str) -> dict[str, Any]:
        c = self._context
        sources = Sources(prometheus=self.url, lanes=(lane,), window=self.window)
        # each query may take the whole deadline; the wait above bounds them together
        window, _ = gather(sources, c.slos, c.pairs, c.thresholds, self._transport, self.timeout_s)
        lanes = diagnose(window, c.thresholds)
        return lane_detail(lanes, lane)


def lane_detail(lanes: Sequence[LaneDiagnosis], lane: str) -> dict[str, Any]:
    """The lane's top findings as audit detail (`findings` empty when nothing was found)."""
    found = next((d.found for d in lanes if d.lane == lane), ())
    return {"found": len(found), "findings": [finding_detail(f) for f in found[:TOP_FINDINGS]]}


def finding_detail(f: Finding) -> dict[str, Any]:
    """One finding in brief: its check, title, explained share and the evidence that breached."""
    evidence = [
        {"signal": s.signal, "value": round(s.value, 4), "threshold": s.threshold, "comparison": s.comparison}
        for s in f.evidence
        if s.breached
    ][:TOP_EVIDENCE]
    explains = {"of": f.explains.of, "share": round(f.explains.share, 4)} if f.explains else None
    return {"check": f.check, "title": f.title, "explains": explains, "evidence": evidence}


def _settle(done: asyncio.Future[dict[str, Any]], result: dict[str, Any]) -> None:
    if not done.done():
        done.set_result(result)


def _error(exc: Exception) -> str:
    text = str(exc)
    if isinstance(exc, DiagnoseInputError):
        text = text.removeprefix("--prometheus: ")
    return text[:300] or type(exc).__name__
