"""Time-to-first-token spent on the server, unsplit: records without vLLM's phases.

Without a joined span (or vLLM's per-request metrics) a record's queue, prefill and front-end
residual collapse into one `server_wait` part. When that part is most of TTFT and TTFT misses
its SLO, the finding stands at that level and names what would split it.
"""

from __future__ import annotations

from lanewatch.collector.diagnose.checks.base import BaseCheck, explains, share_signal
from lanewatch.collector.diagnose.evidence import LaneEvidence, Window, need
from lanewatch.collector.diagnose.model import Finding, Fix
from lanewatch.collector.diagnose.thresholds import Thresholds

__all__ = ["ServerWaitUnsplit"]

SPLIT_FIXES = (
    Fix(
        "join vLLM's spans: run vLLM with --otlp-traces-endpoint at the collector's OTLP receiver",
        "queue, prefill and the front-end residual measured per request, so the cause checks can judge",
        "lanewatch OTLP join (docs/otlp.md)",
    ),
    Fix(
        "or run vLLM with --enable-per-request-metrics",
        "queue and prefill reported in each response",
        "vLLM's per-request metrics",
    ),
)


class ServerWaitUnsplit(BaseCheck):
    """TTFT is mostly waiting on the server, and the records cannot say for what."""

    id = "server-wait/unsplit"
    title = "server-bound before the first token, phases unsplit"
    explanation = (
        "records with no server phases (no span joined) whose TTFT, over its SLO, is mostly the "
        "`server_wait` part (queue + prefill + front end in one): the finding stands at that level. "
        "Fixes: join vLLM's spans ([otlp.md](otlp.md)) or run vLLM with "
        "`--enable-per-request-metrics`, so the queue, prefill and front-end checks can split it."
    )
    needs = ("min_requests", "breakdown")

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """server_wait's share of TTFT high while TTFT misses its SLO, with no server phases joined."""
        if lane.stats.server_phases:
            return self.ok(lane, "server phases joined: the queue, prefill and front-end checks split it")
        share = need(lane.stats.share(("server_wait",), "ttft"), "breakdown")
        held = share_signal("server wait share of TTFT", share, thresholds.queue_share)
        evidence, ok = self.gate(lane, thresholds, held, f"the server wait is {share.value:.0%} of TTFT")
        if ok is not None:
            return ok
        return self.found(
            lane,
            f"{share.value:.0%} of TTFT waits on the server (queue, prefill or front end), unsplit: "
            "no server phases joined",
            evidence,
            explains("ttft", share),
            SPLIT_FIXES,
            missing=("server_phases",),
        )
