"""Prefill-bound lanes, and whether poor prefix reuse is why.

Prefill is SCHEDULED -> first new token: it grows with the prompt tokens the prefix cache did not
hold. The records give prefill's share of TTFT, its growth per prompt token, and (from each
response's `usage.prompt_tokens_details.cached_tokens`, sent by vLLM with
--enable-prompt-tokens-details) the share of their prompt tokens the cache served; vLLM's
prefix-cache counters (hit rate = rate(hits) / rate(queries), in tokens) and `cache_config_info`
say whether reuse is poor or caching is off.
"""

from __future__ import annotations

from lanewatch.collector.diagnose.checks.base import BaseCheck, explains, share_signal
from lanewatch.collector.diagnose.evidence import LaneEvidence, Value, Window, need
from lanewatch.collector.diagnose.model import Finding, Fix, Signal
from lanewatch.collector.diagnose.thresholds import Thresholds

__all__ = ["PrefillPrefixReuse"]

CACHING = "vLLM's automatic prefix caching docs"
REUSE_FIXES = (
    Fix("--enable-prefix-caching", "repeated prompt prefixes skip their prefill", CACHING),
    Fix(
        "put stable content (system prompt, tools, documents) first in every prompt",
        "more of each prompt matches a cached prefix",
        CACHING,
    ),
    Fix(
        "prefix-aware routing across replicas",
        "requests sharing a prefix reach the replica that holds it",
        "llm-d",
    ),
)
COMPUTE_FIXES = (
    Fix(
        "raise --max-num-batched-tokens",
        "bigger prefill chunks: better TTFT (at some ITL cost)",
        "vLLM's optimization and tuning guide",
    ),
    Fix(
        "more tensor parallelism or replicas",
        "prefill is compute-bound: more compute per prompt",
        "Splitwise",
    ),
)


class PrefillPrefixReuse(BaseCheck):
    """Prefill dominates TTFT; low prefix reuse or prefix caching off is the usual cause."""

    id = "prefill/prefix-reuse"
    title = "prefill-bound, low prefix reuse"
    explanation = (
        "prefill is a large share of TTFT over its SLO; the cause is prefix caching off "
        "(`cache_config_info`), a low hit rate, or (both fine) uncached prompt work; the records' "
        "prefill-per-prompt-token slope is shown when the prompt sizes spread over at least a quarter "
        "of their mean (a few tokens' spread gives noise, not a cost per token). Fixes: "
        "`--enable-prefix-caching`, stable content first in every prompt (vLLM's automatic prefix "
        "caching docs), prefix-aware routing (llm-d); for uncached work a larger "
        "`--max-num-batched-tokens` (better TTFT, vLLM's tuning guide) or more compute (Splitwise: "
        "prefill is compute-bound)."
    )
    needs = ("min_requests", "server_phases")
    reads = ("prefix_hit_rate", "prefix_caching")

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """Prefill's share of TTFT high while the lane misses its TTFT SLO; reuse splits the cause."""
        share = need(lane.stats.share(("prefill",), "ttft"), "server_phases")
        held = share_signal("prefill share of TTFT", share, thresholds.prefill_share)
        slope, cached = lane.stats.prefill_per_prompt_token, lane.stats.cached_prompt_share
        shown = [Signal.shown("prefill seconds per prompt token", slope)] if slope is not None else []
        if cached is not None:  # the requests' own view of reuse, beside the server's hit rate
            shown.append(Signal.shown("prompt tokens served from the prefix cache", cached))
        evidence, ok = self.gate(lane, thresholds, held, f"prefill is {share.value:.0%} of TTFT", shown)
        if ok is not None:
            return ok
        return self._cause(lane, thresholds, evidence, share)

    def _cause(self, lane: LaneEvidence, t: Thresholds, evidence: list[Signal], share: Value) -> Finding:
        s = lane.server
        if s.prefix_caching is not None:
            evidence.append(Signal.held("prefix caching enabled", s.prefix_caching, "<", 1))
        if s.prefix_hit_rate is not None:
            evidence.append(Signal.held("prefix-cache hit rate", s.prefix_hit_rate, "<", t.prefix_hit_rate))
        off = s.prefix_caching is not None and s.prefix_caching.value < 1
        rate = s.prefix_hit_rate.value if s.prefix_hit_rate is not None else None
        pct = f"{share.value:.0%} of TTFT"
        if off or (rate is not None and rate < t.prefix_hit_rate):
            why = "prefix caching is off" if off else f"the prefix-cache hit rate is {rate:.0%}"
            return self.found(
                lane, f"prefill-bound ({pct}): {why}", evidence, explains("ttft", share), REUSE_FIXES
            )
        if s.prefix_hit_rate is None and s.prefix_caching is None:
            return self.found(
                lane,
                f"prefill-bound ({pct}), cause unsplit: the prefix-cache series are missing",
                evidence,
                explains("ttft", share),
                REUSE_FIXES[:1] + COMPUTE_FIXES,
                missing=("prefix_hit_rate", "prefix_caching"),
            )
        return self.found(
            lane,
            f"prefill-bound ({pct}) on uncached prompt work; prefix reuse is not the cause",
            evidence,
            explains("ttft", share),
            COMPUTE_FIXES,
            ruled_out=("prefix reuse: caching on and the hit rate above the threshold",),
        )
