"""Each check's finding, ok and unknown paths; a healthy lane yields no finding at all."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from lanewatch.collector.diagnose import (
    CHECKS,
    DEFAULT_THRESHOLDS,
    Finding,
    ServerSeries,
    Value,
    Window,
    check_by_id,
    diagnose,
    top_findings,
)
from lanewatch.exporters import names
from tests.unit.collector.diagnose.build import HEALTHY_SERVER, SLO, Shape, window
from tests.unit.collector.diagnose.checks import CASES, case_modules
from tests.unit.collector.diagnose.checks.windows import COMPUTE_FULL, KV_FULL, pair


def _run(check_id: str, w: Window, lane: str | None = None) -> Finding:
    """The check's finding for one lane, as the runner makes it (its needs, its explainers)."""
    name = lane or ("fast" if "fast" in w.lanes else next(iter(w.lanes)))
    (result,) = diagnose(replace(w, only=(name,)), DEFAULT_THRESHOLDS, [check_by_id(check_id)])
    (finding,) = result.findings
    return finding


def test_every_registered_check_has_its_three_paths_tested() -> None:
    assert sorted(CASES) == sorted(c.id for c in CHECKS)


def test_each_checks_cases_sit_beside_it_in_the_cases_module_of_its_check_module() -> None:
    modules = case_modules()
    misplaced = [
        c.id
        for c in CHECKS
        if c.id not in getattr(modules.get(type(c).__module__.rsplit(".", 1)[1]), "CASES", {})
    ]
    assert misplaced == []


def test_check_ids_are_stable_unique_area_names() -> None:
    ids = [c.id for c in CHECKS]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[a-z-]+/[a-z-]+", i) for i in ids)
    assert all(c.title and c.needs for c in CHECKS)


@pytest.mark.parametrize("check_id", sorted(CASES))
def test_finding(check_id: str) -> None:
    f = _run(check_id, CASES[check_id][0]())
    assert f.verdict == "finding", f.summary
    assert f.check == check_id and f.evidence and f.fixes
    assert any(s.breached for s in f.evidence)
    assert all(fix.action and fix.effect and fix.source for fix in f.fixes)
    if f.explains is not None:
        assert 0 < f.explains.share <= 1 and f.explains.source


@pytest.mark.parametrize("check_id", sorted(CASES))
def test_ok(check_id: str) -> None:
    f = _run(check_id, CASES[check_id][1]())
    assert f.verdict == "ok", f.summary
    assert f.ruled_out and not f.fixes


@pytest.mark.parametrize("check_id", sorted(CASES))
def test_unknown_names_what_is_missing(check_id: str) -> None:
    f = _run(check_id, CASES[check_id][2]())
    assert f.verdict == "unknown", f.summary
    assert any(CASES[check_id][3] in m for m in f.missing), f.missing
    assert CASES[check_id][3] in f.summary or any(CASES[check_id][3] in m for m in f.missing)


@pytest.mark.parametrize(
    "w",
    [
        window(Shape()),
        window(Shape(), None),  # records alone
        window(Shape(), replace(HEALTHY_SERVER, spec_acceptance_length=Value(2.5, "q"))),
        pair(Shape(), Shape(queue=1.1)),
    ],
    ids=["with-server", "records-only", "spec-decode", "two-lanes"],
)
def test_a_healthy_lane_yields_no_finding_though_decode_is_most_of_e2e(w: Window) -> None:
    lane = w.lanes.get("fast") or w.lanes["slow"]
    assert lane.stats.share(("decode",), "e2e").value > 0.9  # type: ignore[union-attr]
    assert top_findings(diagnose(w)) == ()


def test_missing_families_say_unknown_never_ok() -> None:
    bare = window(Shape(queue=1.5), ServerSeries())
    by_id = {f.check: f for lane in diagnose(bare) for f in lane.findings}
    for check_id, family in (
        ("queue/kv-memory", names.VLLM_KV_CACHE_USAGE_PERC),
        ("queue/compute", names.VLLM_NUM_REQUESTS_WAITING),
        ("spec-decode/acceptance", names.VLLM_SPEC_DECODE_NUM_DRAFTS_TOTAL),
    ):
        assert by_id[check_id].verdict == "unknown"
        assert any(family in m for m in by_id[check_id].missing)


def test_records_alone_give_a_phase_level_finding_naming_the_series_that_would_split_it() -> None:
    found = top_findings(diagnose(window(Shape(queue=1.5), None)))
    assert found[0].check == "queue/unsplit"
    assert "cause unsplit" in found[0].summary
    assert names.VLLM_NUM_REQUESTS_WAITING in found[0].missing
    assert found[0].explains is not None and found[0].explains.share == pytest.approx(1.5 / 1.566, abs=0.01)


def test_the_cause_check_outranks_and_replaces_the_phase_level_one() -> None:
    found = top_findings(diagnose(window(Shape(queue=1.5), KV_FULL)))
    assert [f.check for f in found] == ["queue/kv-memory"]


def test_prefix_caching_off_is_named() -> None:
    off = replace(HEALTHY_SERVER, prefix_caching=Value(0, "q"))
    f = _run("prefill/prefix-reuse", window(Shape(prefill=1.5), off))
    assert f.verdict == "finding" and "prefix caching is off" in f.summary
    assert f.fixes[0].action == "--enable-prefix-caching"


def test_a_symptom_alone_is_never_a_finding() -> None:
    # TTFT far over its SLO, yet no phase stands out as a cause and nothing saturates: no check
    # blames the symptom itself (queue, prefill and the residual each under its share threshold).
    w = window(Shape(queue=0.28, prefill=0.28, residual=0.17))
    p99 = w.lanes["slow"].stats.quantile("ttft_p99")
    assert p99 is not None and SLO.ttft_s is not None and p99.value > SLO.ttft_s
    assert top_findings(diagnose(w)) == ()


def test_ranking_puts_the_larger_explained_share_first() -> None:
    w = window(Shape(queue=1.5, error_every=50), KV_FULL)
    found = top_findings(diagnose(w))
    assert [f.check for f in found] == ["queue/kv-memory", "errors/shedding"]
    lane = diagnose(w)[0]
    verdicts = [f.verdict for f in lane.findings]
    assert verdicts == sorted(verdicts, key=["finding", "unknown", "ok"].index)


def test_a_fast_lane_without_its_slow_partners_evidence_is_unknown_not_ok() -> None:
    lanes = pair(Shape(queue=1.0), Shape(queue=1.1))
    alone = Window({"fast": lanes.lanes["fast"]}, pairs=lanes.pairs)
    f = _run("lanes/misrouting", alone)
    assert f.verdict == "unknown" and f.missing == ("the slow lane's evidence",)


def test_only_the_lanes_asked_for_are_diagnosed() -> None:
    lanes = pair(Shape(queue=1.0), Shape(queue=1.1))
    w = Window(lanes.lanes, lanes.pairs, only=("fast",))
    (lane,) = diagnose(w)
    assert lane.lane == "fast"
    assert {f.check: f.verdict for f in lane.findings}["lanes/misrouting"] == "finding"


def test_a_queue_vllm_holds_only_for_a_moment_does_not_explain_seconds_of_waiting() -> None:
    # Little's law: 6 waiting at 4 finished/s is 1.5 s of wait, the whole measured queue: compute.
    # At 600 finished/s the same 6 waiting are 10 ms: the 1.5 s queue is ahead of the scheduler.
    explained = replace(COMPUTE_FULL, finished_per_s=Value(4.0, "q finished"))
    assert [f.check for f in top_findings(diagnose(window(Shape(queue=1.5), explained)))] == ["queue/compute"]
    momentary = replace(COMPUTE_FULL, finished_per_s=Value(600.0, "q finished"))
    found = top_findings(diagnose(window(Shape(queue=1.5), momentary)))
    assert [f.check for f in found] == ["queue/unsplit"]
    little = next(s for s in found[0].evidence if "Little" in s.signal)
    assert little.value == pytest.approx(0.01) and little.threshold == pytest.approx(0.75)
    assert "ahead of the scheduler" in found[0].summary


def test_records_without_server_phases_still_name_the_server_wait() -> None:
    found = top_findings(diagnose(window(Shape(queue=1.5, spans=False), None)))
    assert [f.check for f in found] == ["server-wait/unsplit"]
    assert "server phases" in found[0].missing[0]
    assert found[0].fixes[0].action.startswith("join vLLM's spans")


SHARE_CHECKS = (
    "connection/setup",
    "frontend/outside-engine",
    "lanes/misrouting",
    "prefill/prefix-reuse",
    "queue/unsplit",
    "server-wait/unsplit",
)


def _ttft_slo(w: Window, ttft_s: float | None) -> Window:
    lanes = {name: replace(lane, slo=replace(lane.slo, ttft_s=ttft_s)) for name, lane in w.lanes.items()}
    return replace(w, lanes=lanes)


@pytest.mark.parametrize("check_id", SHARE_CHECKS)
def test_a_share_check_judges_on_the_share_alone_without_a_ttft_slo_and_rules_out_when_it_is_met(
    check_id: str,
) -> None:
    finds = CASES[check_id][0]()
    assert _run(check_id, _ttft_slo(finds, None)).verdict == "finding"
    met = _run(check_id, _ttft_slo(finds, 1e6))
    assert met.verdict == "ok" and any("SLO" in r for r in met.ruled_out), met
