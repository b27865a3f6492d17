"""Decode-side causes: prefill/decode interference, a decode-bound lane, ineffective speculative decoding.

Decode is first -> last new token, and it is most of E2E in every healthy lane, so none of these
counts without its anchor: stalls a mean TPOT hides (interference), or the TPOT SLO missed.
"""

from __future__ import annotations

from lanewatch.collector.diagnose.checks.base import BaseCheck, explains, share_signal, symptom
from lanewatch.collector.diagnose.evidence import LaneEvidence, Value, Window, need
from lanewatch.collector.diagnose.model import Finding, Fix, Signal
from lanewatch.collector.diagnose.thresholds import Thresholds

__all__ = ["DecodeBound", "Interference", "SpecDecodeAcceptance"]

TUNING = "vLLM's optimization and tuning guide (chunked prefill)"
INTERFERENCE_FIXES = (
    Fix("lower --max-num-batched-tokens (about 2048)", "smaller prefill chunks per step: better ITL", TUNING),
    Fix("prefill/decode disaggregation", "prefills no longer stall running decodes", "DistServe (OSDI'24)"),
)
DECODE_FIXES = (
    Fix(
        "a quantized model (FP8, INT4 weights)",
        "fewer bytes read per token: lower TPOT",
        "Splitwise (ISCA'24)",
    ),
    Fix(
        "speculative decoding, at low batch sizes",
        "several tokens per forward pass when drafts are accepted",
        "vLLM's speculative decoding docs",
    ),
    Fix("more tensor parallelism (--tensor-parallel-size)", "more memory bandwidth per token", "vLLM docs"),
)
SPEC_FIXES = (
    Fix("fewer speculative tokens (num_speculative_tokens)", "fewer rejected drafts per step", "vLLM docs"),
    Fix("a drafter closer to the target model", "more drafts accepted", "vLLM's speculative decoding docs"),
    Fix("speculative decoding off", "no draft overhead when drafts are mostly rejected", "vLLM docs"),
)


class Interference(BaseCheck):
    """New prefills stall running decodes (Sarathi-Serve's generation stalls)."""

    id = "interference/prefill-decode"
    title = "prefill/decode interference"
    explanation = (
        "ITL P99/P50 high and the fluidity index low (Metron: 1 − missed per-token deadlines / all "
        "deadlines; token *i* after the first is due *i* × the TPOT SLO after it, so early tokens "
        "bank slack), and the stalls line up with long-prompt arrivals (Sarathi-Serve's generation "
        "stalls); mean TPOT is shown against its SLO, which it may meet. Fixes: a lower "
        "`--max-num-batched-tokens` (about 2048: better ITL, vLLM's tuning guide), prefill/decode "
        "disaggregation (DistServe)."
    )
    needs = ("itl_gaps",)
    reads = ("stall_overlap",)

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """ITL's tail far above its median, missed per-token deadlines, stalls at long-prompt arrivals."""
        st = lane.stats
        p50, p99 = need(st.quantile("itl_p50"), "itl_gaps"), need(st.quantile("itl_p99"), "itl_gaps")
        ratio = Value(p99.value / p50.value, f"itl p99 / itl p50; {p99.source}")
        evidence = [Signal.held("ITL p99 / p50", ratio, ">=", thresholds.itl_tail_ratio)]
        if st.fluidity is not None:
            evidence.append(Signal.held("fluidity index", st.fluidity, "<", thresholds.fluidity))
        tpot = st.means.get("tpot")
        if tpot is not None:
            evidence.append(Signal.held("mean TPOT (SLO)", tpot, ">", lane.slo.tpot_s))
        stalled = ratio.value >= thresholds.itl_tail_ratio and (
            st.fluidity is None or st.fluidity.value < thresholds.fluidity
        )
        if not stalled:
            return self.ok(lane, "no decode stalls", evidence)
        overlap = need(st.stalls_with_long_prompt, "stall_overlap")
        evidence.append(
            Signal.held(
                "stalls overlapping a long-prompt arrival", overlap, ">=", thresholds.stall_long_prompt_share
            )
        )
        if overlap.value < thresholds.stall_long_prompt_share:
            return self.ok(
                lane, "decodes stall, but not when long prompts arrive", evidence, ("prefill interference",)
            )
        share = st.stall_share_of_e2e
        return self.found(
            lane,
            "new prefills stall running decodes: ITL tail stalls line up with long-prompt arrivals",
            evidence,
            explains("e2e", share) if share else None,
            INTERFERENCE_FIXES,
        )


def _decode_share(lane: LaneEvidence) -> Value | None:
    return lane.stats.share(("decode",), "e2e")


def _stalls_alone(lane: LaneEvidence, thresholds: Thresholds) -> bool:
    """ITL's median meets the TPOT SLO and its tail is far above it: stalls, not uniformly slow decoding."""
    p50, p99, slo = lane.stats.quantile("itl_p50"), lane.stats.quantile("itl_p99"), lane.slo.tpot_s
    if p50 is None or p99 is None or slo is None or p50.value <= 0:
        return False
    return p50.value <= slo and p99.value / p50.value >= thresholds.itl_tail_ratio


class DecodeBound(BaseCheck):
    """Decode is most of E2E while the lane misses its TPOT SLO."""

    id = "decode/bound"
    title = "decode-bound"
    explanation = (
        "decode is most of E2E *and* TPOT misses its SLO; the running batch is shown. Fixes: "
        "quantization (Splitwise: decode is memory-bound), speculative decoding at low batch, more "
        "tensor parallelism."
    )
    needs = ("min_requests", "breakdown", "tpot_slo")
    reads = ("running", "spec_acceptance_length")

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """Decode's share of E2E high and the TPOT SLO missed."""
        share = need(_decode_share(lane), "breakdown")
        tpot = symptom(lane, "tpot", thresholds)
        signal = need(tpot.signal, "tpot_slo")
        evidence = [signal, share_signal("decode share of E2E", share, thresholds.decode_share)]
        if lane.server.running is not None:
            evidence.append(Signal.shown("running requests (mean)", lane.server.running))
        if not tpot.missed:
            return self.ok(lane, "the lane meets its TPOT SLO", evidence)
        spec = lane.server.spec_acceptance_length
        if spec is not None and spec.value < thresholds.spec_acceptance_length:
            return self.ok(
                lane,
                "drafts are mostly rejected: decode time is speculative decoding's (spec-decode/acceptance)",
                evidence,
                ("decoding without speculation",),
            )
        if _stalls_alone(lane, thresholds):
            return self.ok(
                lane,
                "the median token meets the TPOT SLO: TPOT's tail is stalls (interference/prefill-decode)",
                evidence,
                ("slow decoding",),
            )
        if share.value < thresholds.decode_share:
            return self.ok(lane, f"decode is {share.value:.0%} of E2E", evidence)
        return self.found(
            lane,
            f"decode-bound: decode is {share.value:.0%} of E2E and TPOT misses its SLO",
            evidence,
            explains("e2e", share),
            DECODE_FIXES,
        )


class SpecDecodeAcceptance(BaseCheck):
    """Speculative decoding whose drafts are mostly rejected."""

    id = "spec-decode/acceptance"
    title = "speculative decoding ineffective"
    explanation = (
        "mean acceptance length below 1.5 while TPOT misses its SLO. Fixes: fewer speculative tokens, "
        "a closer drafter, or speculative decoding off (vLLM's speculative decoding docs)."
    )
    needs = ("spec_acceptance_length",)

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """Mean acceptance length (1 + accepted / drafts) below the threshold while TPOT misses its SLO."""
        length = need(lane.server.spec_acceptance_length, "spec_acceptance_length")
        evidence = [Signal.held("mean acceptance length", length, "<", thresholds.spec_acceptance_length)]
        tpot = symptom(lane, "tpot", thresholds)
        if tpot.signal is not None:
            evidence.insert(0, tpot.signal)
        if length.value >= thresholds.spec_acceptance_length:
            return self.ok(lane, f"drafts accepted: mean acceptance length {length.value:.2f}", evidence)
        if tpot.met:
            return self.ok(lane, "acceptance is low but the lane meets its TPOT SLO", evidence)
        share = _decode_share(lane)
        return self.found(
            lane,
            f"speculative decoding accepts few drafts (mean acceptance length {length.value:.2f})",
            evidence,
            explains("e2e", share) if share else None,
            SPEC_FIXES,
        )
