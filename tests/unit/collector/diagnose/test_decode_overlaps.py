"""decode/bound leaves the decode time to the more specific check that explains it: stalls
(interference) or rejected drafts (speculative decoding), as the simulator's conditions show."""

from __future__ import annotations

from dataclasses import replace

from lanewatch.collector.diagnose import diagnose, top_findings
from lanewatch.collector.diagnose.evidence import Value
from tests.unit.collector.diagnose.build import HEALTHY_SERVER, Shape, window


def test_stalls_that_miss_the_tpot_tail_are_interference_not_decode_bound() -> None:
    # every request stalls 5 gaps of 0.5 s while a long prompt arrives: TPOT's P99 misses its SLO,
    # but the median token (20 ms) meets it
    (lane,) = diagnose(window(Shape(stall_s=0.5, stall_every=1, long_prompt_every=2)))
    verdicts = {f.check: f for f in lane.findings}
    assert verdicts["decode/bound"].verdict == "ok"
    assert "stalls" in verdicts["decode/bound"].summary
    assert [f.check for f in lane.found] == ["interference/prefill-decode"]


def test_uniformly_slow_tokens_stay_decode_bound() -> None:
    found = top_findings(diagnose(window(Shape(tpot=0.08))))
    assert [f.check for f in found] == ["decode/bound"]


def test_rejected_drafts_are_speculative_decodings_not_decode_bound() -> None:
    server = replace(HEALTHY_SERVER, spec_acceptance_length=Value(1.42, "q"))
    found = top_findings(diagnose(window(Shape(tpot=0.08), server)))
    assert [f.check for f in found] == ["spec-decode/acceptance"]
