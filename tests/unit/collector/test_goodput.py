"""Goodput's judgement of one request: every latency SLO of the routed lane met, and no failure."""

from __future__ import annotations

import dataclasses

from lanewatch.alerts.spec import DEFAULT_SPEC, load_spec, parse_spec
from lanewatch.collector.record.goodput import Bound, Goodput, Tally, from_spec, outcome, routed_lane, tally
from lanewatch.collector.record.timing import ErrorKind, RequestTiming


def rec(lane: str = "slow", cls: str = "short", ttft: float = 1.0, e2e: float = 4.0, out: int = 61,
        error: ErrorKind | None = None, routed: str | None = None) -> RequestTiming:  # fmt: skip
    r = RequestTiming(
        source="tap", target=f"vllm-{lane}", lane=lane, request_class=cls, model="m", status=200,
        ttft_s=ttft, e2e_s=e2e, itl_s=(0.05, 0.06), output_tokens=out, error=error,
    )  # fmt: skip
    return dataclasses.replace(r, attrs={"routed_lane": routed}) if routed else r


def test_the_default_spec_gives_each_lane_its_latency_bounds_and_excluded_errors() -> None:
    g = from_spec(load_spec(DEFAULT_SPEC))
    assert g.bounds == {
        "fast": (Bound("ttft", 0.5), Bound("tpot", 0.05)),
        "slow": (Bound("ttft", 2.0), Bound("tpot", 0.05)),
    }
    uncounted = frozenset({"client_disconnect", "http_400", "http_404", "http_413", "http_422"})
    assert g.excluded_errors == {"fast": uncounted, "slow": uncounted}


def test_a_request_meets_goodput_only_within_every_bound() -> None:
    g = from_spec(load_spec(DEFAULT_SPEC))
    assert rec(ttft=1.0, e2e=3.0, out=41).tpot_s == 0.05
    assert outcome(g, rec(ttft=1.0, e2e=3.0, out=41)) == "met"  # TTFT 1 s ≤ 2 s, TPOT 50 ms ≤ 50 ms
    assert outcome(g, rec(ttft=2.5, e2e=4.0, out=41)) == "missed"  # TTFT over
    assert outcome(g, rec(ttft=1.0, e2e=5.0, out=41)) == "missed"  # TPOT 100 ms over
    assert outcome(g, rec(ttft=1.0, e2e=1.0, out=1)) == "met"  # one token: no TPOT to judge
    assert outcome(g, rec(error=ErrorKind.HTTP_5XX)) == "failed"
    assert outcome(g, rec(error=ErrorKind.CLIENT_DISCONNECT)) is None  # left out, like availability
    assert outcome(g, rec(lane="other")) == "met"  # a lane without SLOs: only failures count


def test_a_client_mistake_is_no_failure_but_a_refused_key_is() -> None:
    g = from_spec(load_spec(DEFAULT_SPEC))
    for status in (400, 404, 413, 422):
        assert outcome(g, dataclasses.replace(rec(error=ErrorKind.HTTP_4XX), status=status)) is None
    assert outcome(g, dataclasses.replace(rec(error=ErrorKind.HTTP_4XX), status=401)) == "failed"
    assert outcome(g, dataclasses.replace(rec(error=ErrorKind.HTTP_429), status=429)) == "failed"


def test_a_shifted_request_is_judged_by_and_counted_for_the_lane_it_was_routed_to() -> None:
    g = from_spec(load_spec(DEFAULT_SPEC))
    shifted = rec(lane="fast", ttft=1.0, e2e=3.0, out=41, routed="slow")
    assert routed_lane(shifted) == "slow"
    assert outcome(g, shifted) == "met"  # 1 s misses the fast lane's 0.5 s, but not the slow lane's 2 s
    counted = tally(g, [shifted, rec(ttft=3.0), rec(lane="fast", ttft=0.1, e2e=1.0, out=41)])
    assert counted[("slow", "short")] == Tally(met=1, missed=1)
    assert counted[("fast", "short")].ratio == 1.0


def test_selectors_and_itl_bounds_apply_as_the_slo_says() -> None:
    spec = parse_spec(
        """
apiVersion: lanewatch/v1
kind: SLOSpec
metadata: {name: t}
spec:
  slos:
    - {name: ttft_batch, lanes: [slow], objective: 99, selector: {request_class: batch},
       latency: {metric: ttft, threshold: 5.0}}
    - {name: itl, lanes: [slow], objective: 99, latency: {metric: itl, threshold: 0.055}}
""",
        "t.yaml",
    )
    g = from_spec(spec)
    assert outcome(g, rec(cls="short", ttft=9.0)) == "missed"  # every gap ≤ 55 ms, but 60 ms is there
    fast_gaps = dataclasses.replace(rec(cls="short", ttft=9.0), itl_s=(0.01, 0.05))
    assert outcome(g, fast_gaps) == "met"  # the batch-only TTFT bound does not apply to short
    assert outcome(g, dataclasses.replace(fast_gaps, request_class="batch")) == "missed"


def test_an_empty_tally_has_no_ratio() -> None:
    assert Tally().ratio is None and Goodput().bounds == {}
