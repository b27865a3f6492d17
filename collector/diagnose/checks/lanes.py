"""Lane-level patterns: flat latency, a fast lane converging on the slow one, errors and shedding."""

from __future__ import annotations

import bisect

from lanewatch.collector.diagnose.checks.base import BaseCheck, any_latency_miss, explains
from lanewatch.collector.diagnose.evidence import LaneEvidence, Value, Window, need
from lanewatch.collector.diagnose.model import Finding, Fix, Signal
from lanewatch.collector.diagnose.thresholds import Thresholds
from lanewatch.collector.record.window import coefficient_of_variation

__all__ = ["ErrorsShedding", "FlatLatency", "LaneMisrouting"]

# The part of TTFT a fixed cost sits in, and the check that splits its cause.
FIXED_PARTS = {
    "dns": "connection/setup",
    "connect": "connection/setup",
    "tls": "connection/setup",
    "send": "frontend/outside-engine",
    "queue": "queue/*",
    "prefill": "prefill/prefix-reuse",
    "residual": "frontend/outside-engine",
    "server_wait": "server-wait/unsplit",
}
# Error kinds that are not the server's failure (the default availability SLO excludes them).
NOT_SERVER = frozenset({"client_disconnect"})
ROUTING = "lanewatch gateway routing (docs/gateway.md)"


class FlatLatency(BaseCheck):
    """E2E and TTFT barely depend on the work: a fixed cost dominates."""

    id = "latency/flat"
    title = "flat latency"
    explanation = (
        "the CV of mean E2E across request classes below 0.1 and the fit's fixed cost most of E2E, "
        "with an SLO missed; names the part that holds the fixed cost and the check that splits it."
    )
    needs = ("min_requests", "work_fit")

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """CV of class means below the threshold and the fit's fixed cost most of E2E, SLO missed."""
        st = lane.stats
        cv = need(coefficient_of_variation(list(st.class_e2e_means.values())), "work_fit")
        fixed = need(st.fit_fixed_share, "work_fit")
        evidence = [
            Signal.held("CV of mean E2E across classes", Value(cv, st.class_source), "<", thresholds.flat_cv),
            Signal.held("fixed share of E2E (fit)", fixed, ">=", thresholds.fixed_share),
        ]
        misses = any_latency_miss(lane, thresholds)
        evidence += misses
        flat = cv < thresholds.flat_cv and fixed.value >= thresholds.fixed_share
        if not flat:
            return self.ok(lane, "latency follows the work", evidence)
        if not misses and _has_slo(lane):
            return self.ok(lane, "flat, but the lane meets its latency SLOs", evidence)
        part = _fixed_part(lane)
        where = f"; the fixed cost sits in {part} (see {FIXED_PARTS[part]})" if part else ""
        return self.found(
            lane,
            f"latency barely depends on the work (CV {cv:.2f}){where}",
            evidence,
            explains("e2e", fixed),
            (
                Fix(
                    f"the fix {FIXED_PARTS[part] if part else 'the other checks'} gives",
                    "removes the fixed cost",
                    "this diagnosis",
                ),
            ),
        )


def _has_slo(lane: LaneEvidence) -> bool:
    return any(lane.slo.get(m) is not None for m in ("ttft", "tpot", "e2e", "itl"))


def _fixed_part(lane: LaneEvidence) -> str | None:
    parts = {p: v.value for p, v in lane.stats.parts.items() if p in FIXED_PARTS}
    return max(parts, key=parts.__getitem__) if parts else None


class LaneMisrouting(BaseCheck):
    """The fast lane's tail has converged on the slow lane's, often with long work routed fast."""

    id = "lanes/misrouting"
    title = "lane misrouting / convergence"
    explanation = (
        "the fast lane's P99 TTFT at 0.8 or more of its slow lane's while the fast lane misses its "
        "SLO; the share of fast-lane requests at least as long as the slow lane's median says whether "
        "long work is routed fast. Fixes: the routing rules, the fast lane's capacity."
    )
    needs = ("pair",)

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """Fast P99 TTFT over slow P99 TTFT at or above the ratio while the fast lane misses its SLO."""
        slow_name = window.slow_name(lane.lane)
        if slow_name is None:
            return self.ok(lane, "not the fast lane of a lane pair", ruled_out=("not a fast lane",))
        slow = need(window.lanes.get(slow_name), "pair")
        fast_p99 = need(lane.stats.quantile("ttft_p99"), "pair")
        slow_p99 = need(slow.stats.quantile("ttft_p99"), "pair")
        ratio = Value(fast_p99.value / slow_p99.value, f"ttft p99 {lane.lane} / ttft p99 {slow.lane}")
        held = Signal.held(f"P99 TTFT {lane.lane}/{slow.lane}", ratio, ">=", thresholds.convergence_ratio)
        long = _long_share(lane, slow)
        shown = (
            [Signal.held("long requests on the fast lane", long, ">=", thresholds.long_request_share)]
            if long is not None
            else []
        )
        summary = f"the {lane.lane} lane stays apart from {slow.lane}"
        evidence, ok = self.gate(lane, thresholds, held, summary, shown)
        if ok is not None:
            return ok
        misrouted = long is not None and long.value >= thresholds.long_request_share
        why = "long requests run on the fast lane" if misrouted else "the fast lane lacks capacity"
        return self.found(
            lane,
            f"the {lane.lane} lane's P99 TTFT is {ratio.value:.0%} of the {slow.lane} lane's: {why}",
            evidence,
            explains("requests", long) if long is not None else None,
            (
                Fix(
                    "route long requests (output tokens) to the slow lane",
                    "the fast lane keeps short work",
                    ROUTING,
                ),
                Fix("more capacity on the fast lane", "its tail returns below the slow lane's", "capacity"),
            ),
        )


def _long_share(fast: LaneEvidence, slow: LaneEvidence) -> Value | None:
    tokens, median = fast.stats.output_tokens, slow.stats.output_tokens_p50
    if not tokens or median is None:
        return None
    share = (len(tokens) - bisect.bisect_left(tokens, median.value)) / len(tokens)
    return Value(share, f"records: share of {fast.lane} requests with output_tokens >= {slow.lane}'s p50")


class ErrorsShedding(BaseCheck):
    """Requests fail or are shed: 429, 5xx, stream errors, truncations, timeouts."""

    id = "errors/shedding"
    title = "errors and shedding"
    explanation = (
        "429, 5xx, stream errors, truncations and timeouts at 1% of requests or more "
        "(`client_disconnect` left out, as the availability SLO does). Fixes: capacity, a degrade "
        "policy that shifts or caps before requests fail ([degrade.md](degrade.md))."
    )
    needs = ("records",)

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """The share of failed requests at or above the threshold."""
        st = lane.stats
        counted = {k: n for k, n in st.errors.items() if k not in NOT_SERVER and n > 0}
        failed = sum(counted.values())
        share = Value(failed / st.requests, st.errors_source or "records: failed / requests")
        evidence = [Signal.held("failed share of requests", share, ">=", thresholds.error_share)]
        for kind, n in sorted(counted.items(), key=lambda kv: -kv[1]):
            evidence.append(Signal.shown(f"errors: {kind}", Value(n, share.source)))
        if share.value < thresholds.error_share:
            return self.ok(lane, f"{share.value:.1%} of requests failed", evidence)
        top = max(counted, key=counted.__getitem__)
        return self.found(
            lane,
            f"{share.value:.1%} of requests failed, most as {top}",
            evidence,
            explains("requests", share),
            (
                Fix("more capacity for the lane", "fewer 429s and overload errors", "capacity"),
                Fix(
                    "a degrade policy that shifts or caps work before it fails (lanewatch degrade)",
                    "requests shifted instead of refused",
                    "docs/degrade.md",
                ),
            ),
        )
