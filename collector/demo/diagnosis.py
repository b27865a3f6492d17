"""The demo's diagnosis of the fault: once the faulted lane's page fires, the demo diagnoses that
lane from its own Prometheus over the fault so far, as `lanewatch diagnose --prometheus URL
--lane L --window W` does (W the time since the fault, at least MIN_WINDOW_S), for the live view
and summary.json.

It runs beside the demo's loop under a deadline (the degrade controller's own runner,
collector/degrade/audit_diagnosis.py), so a slow Prometheus never holds up the story.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from lanewatch.collector.degrade.audit_diagnosis import DiagnosisContext, PrometheusWhy

from .events import Event

__all__ = ["FaultDiagnosis", "diagnosis_context", "finding_line"]

# The fault pages ~11 s in; at the demo's ~2 requests/s the slow lane needs a longer range than
# that for the diagnosis's min_requests, so the range reaches back before the fault (its 3 s queue
# still dominates the lane's mean TTFT).
MIN_WINDOW_S = 60
TIMEOUT_S = 10.0


def diagnosis_context(spec_path: Path) -> DiagnosisContext:
    """The SLOs and lane pairs of the SLO spec the demo's Prometheus judges by."""
    from lanewatch.alerts.spec import load_spec
    from lanewatch.collector.diagnose import slo_targets
    from lanewatch.collector.record.goodput import from_spec

    spec = load_spec(spec_path)
    return DiagnosisContext(slo_targets(from_spec(spec)), tuple((c.fast, c.slow) for c in spec.convergence))


def finding_line(diagnosis: dict[str, Any] | None) -> str | None:
    """The top finding in one line ("queue/unsplit: ... (explains 97% of TTFT)"), or why there is none."""
    if diagnosis is None:
        return None
    if diagnosis.get("error"):
        return f"{diagnosis['lane']} lane: no diagnosis ({diagnosis['error']})"
    findings = diagnosis.get("findings") or []
    if not findings:
        return f"{diagnosis['lane']} lane: no finding over {diagnosis['window']}"
    top = findings[0]
    share = top.get("explains")
    explains = f" (explains {share['share']:.0%} of {share['of'].upper()})" if share else ""
    return f"{diagnosis['lane']} lane: {top['check']}: {top['title']}{explains}"


class FaultDiagnosis:
    """Starts one diagnosis of the faulted lane when its page fires; holds the result."""

    def __init__(
        self,
        prometheus_url: str | None,
        lane: str,
        context: DiagnosisContext,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._url, self.lane, self._context = prometheus_url, lane, context
        self._transport = transport
        self._task: asyncio.Task[None] | None = None
        self.result: dict[str, Any] | None = None  # summary.json's `diagnosis`

    def on_events(self, events: Sequence[Event], all_events: Sequence[Event]) -> None:
        """Start the diagnosis at the first page on the lane (once per run)."""
        if self._url is None or self._task is not None:
            return
        fired = any(
            e.kind == "alert_firing"
            and e.details.get("severity") == "page"
            and e.details.get("lane") == self.lane
            for e in events
        )
        injected = next((e.t for e in all_events if e.kind == "fault_injected"), None)
        if fired and injected is not None:
            window = f"{max(MIN_WINDOW_S, math.ceil(time.time() - injected))}s"  # the fault so far
            self._task = asyncio.create_task(self._run(self._url, window))

    async def _run(self, url: str, window: str) -> None:
        why = PrometheusWhy(url, self._context, window=window, timeout_s=TIMEOUT_S, transport=self._transport)
        at = time.time()
        detail = await why(self.lane)
        self.result = {"t": round(at, 3), "lane": self.lane, "window": window, **detail}

    @property
    def line(self) -> str | None:
        """The top finding in one line, once the diagnosis is done."""
        return finding_line(self.result)

    async def finish(self) -> None:
        """Wait for a diagnosis under way (it has its own deadline)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
