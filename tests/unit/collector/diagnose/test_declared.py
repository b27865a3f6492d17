"""Checks declare their data: the runner makes `unknown` from `needs`, `explained_by` replaces
re-running another check's logic, and `--check`/`--skip` choose among the registered checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lanewatch.collector.diagnose import (
    CHECKS,
    DEFAULT_THRESHOLDS,
    Finding,
    LaneEvidence,
    LaneStats,
    ServerSeries,
    Thresholds,
    Value,
    Window,
    check_by_id,
    diagnose,
)
from lanewatch.collector.diagnose.checks.base import BaseCheck
from lanewatch.collector.diagnose.evidence import EVIDENCE, SERVER_KEYS, flat_keys, need
from lanewatch.collector.diagnose.registry import UnknownCheckError, planned, select, server_keys
from lanewatch.collector.diagnose.thresholds import CHOICE
from tests.unit.collector.diagnose.build import HEALTHY_SERVER, Shape, window

KV_FULL = replace(
    HEALTHY_SERVER, waiting=Value(6, "q"), kv_usage=Value(0.96, "q"), preemptions_per_s=Value(0.4, "q")
)


def _labels(check_id: str) -> set[str]:
    return {EVIDENCE[k].label for k in flat_keys(check_by_id(check_id).needs)} | {
        "the slow lane's evidence"  # `pair` names the partner lane it lacks
    }


def _findings(w: Window, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> dict[str, Finding]:
    return {f.check: f for lane in diagnose(w, thresholds) for f in lane.findings}


def test_every_declaration_names_registered_keys_and_checks() -> None:
    ids = {c.id for c in CHECKS}
    for c in CHECKS:
        assert c.explanation and c.needs, c.id
        assert set(flat_keys(c.needs)) | set(c.reads) <= set(EVIDENCE), c.id
        assert set(c.explained_by) <= ids - {c.id}, c.id


def test_a_lane_with_no_evidence_is_unknown_for_every_check_naming_only_what_it_declared() -> None:
    bare = LaneEvidence("fast", LaneStats(), ServerSeries())
    w = Window({"fast": bare, "slow": replace(bare, lane="slow")}, pairs=(("fast", "slow"),), only=("fast",))
    found = _findings(w)
    assert sorted(found) == sorted(c.id for c in CHECKS)
    for check_id, f in found.items():
        assert f.verdict == "unknown", (check_id, f.summary)
        assert f.missing and set(f.missing) <= _labels(check_id), (check_id, f.missing)


def test_records_alone_leave_exactly_the_checks_that_need_prometheus_unknown() -> None:
    found = _findings(window(Shape(), None))
    unknown = {i for i, f in found.items() if f.verdict == "unknown"}
    assert unknown == {c.id for c in CHECKS if c.prometheus}
    assert unknown  # some check needs vLLM's series
    for check_id in unknown:
        needed = {EVIDENCE[k].label for k in flat_keys(check_by_id(check_id).needs) if k in SERVER_KEYS}
        assert set(found[check_id].missing) <= needed


class _Declares(BaseCheck):
    """A check for this test only: it needs KV usage and takes the prefix hit rate with `need`."""

    id = "test/declares"
    title = "declares its needs"
    explanation = "a test check"
    needs = ("kv_usage",)
    reads = ("prefix_hit_rate",)
    calls = 0

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """Ok when the hit rate is there."""
        type(self).calls += 1
        rate = need(lane.server.prefix_hit_rate, "prefix_hit_rate")
        return self.ok(lane, f"hit rate {rate.value}")


def test_a_check_runs_only_with_its_needs_and_a_value_it_needs_on_the_way_is_unknown_too() -> None:
    check = _Declares()
    _Declares.calls = 0
    (lane,) = diagnose(window(Shape(), None), checks=[check])
    assert _Declares.calls == 0 and lane.findings[0].verdict == "unknown"
    assert lane.findings[0].missing == (EVIDENCE["kv_usage"].label,)
    assert lane.findings[0].summary == f"cannot judge: missing {EVIDENCE['kv_usage'].label}"
    (lane,) = diagnose(window(Shape(), replace(HEALTHY_SERVER, prefix_hit_rate=None)), checks=[check])
    assert _Declares.calls == 1 and lane.findings[0].missing == (EVIDENCE["prefix_hit_rate"].label,)
    assert check.prometheus and server_keys([check]) == {"kv_usage", "prefix_hit_rate"}


def test_a_check_explained_by_another_that_fired_is_ok_naming_it() -> None:
    queue_bound = window(Shape(queue=1.5), KV_FULL)
    unsplit = check_by_id("queue/unsplit")
    assert "queue/kv-memory" in unsplit.explained_by
    found = _findings(queue_bound)
    assert found["queue/kv-memory"].verdict == "finding"
    assert found["queue/unsplit"].verdict == "ok"
    assert found["queue/unsplit"].summary == "explained by queue/kv-memory"
    # the same lane without vLLM's series: nothing explains the queue, so it stands
    assert _findings(window(Shape(queue=1.5), None))["queue/unsplit"].verdict == "finding"


def test_an_explainer_not_chosen_still_runs_unreported() -> None:
    queue_bound = window(Shape(queue=1.5), KV_FULL)
    alone = Thresholds(checks=("queue/unsplit",))
    assert [c.id for c in planned(select(alone.checks))][-1] == "queue/unsplit"
    found = _findings(queue_bound, alone)
    assert list(found) == ["queue/unsplit"] and found["queue/unsplit"].verdict == "ok"
    skipped = _findings(queue_bound, Thresholds(skip=("queue/kv-memory",)))
    assert "queue/kv-memory" not in skipped and skipped["queue/unsplit"].verdict == "ok"


@pytest.mark.parametrize("chosen", [c.id for c in CHECKS])
def test_check_and_skip_choose_among_the_registered_checks(chosen: str) -> None:
    everyone = [c.id for c in CHECKS]
    assert [c.id for c in select((chosen,))] == [chosen]
    assert [c.id for c in select((), (chosen,))] == [i for i in everyone if i != chosen]
    only = _findings(window(Shape(queue=1.5), KV_FULL), Thresholds(checks=(chosen,)))
    assert list(only) == [chosen]


def test_an_unknown_check_id_is_refused_naming_it_and_where_it_was_given() -> None:
    with pytest.raises(UnknownCheckError, match=r"--check: no check 'queue/nosuch' \(the checks: queue/kv"):
        select(("queue/nosuch",))
    with pytest.raises(UnknownCheckError, match=r"diagnose\.skip: no check 'x/y'"):
        select((), ("x/y",), skip_from="diagnose.skip")


def test_the_choice_fields_are_ids_and_not_thresholds() -> None:
    assert set(CHOICE) <= set(Thresholds.model_fields)
    with pytest.raises(ValueError, match="checks"):
        Thresholds(checks=("not an id",))


def test_prometheus_is_asked_only_for_the_series_the_chosen_checks_declare() -> None:
    every = server_keys(CHECKS)
    assert every == {k for c in planned(CHECKS) for k in (*flat_keys(c.needs), *c.reads) if k in SERVER_KEYS}
    spec = server_keys(select(("spec-decode/acceptance",)))
    assert spec == {"spec_acceptance_length"}
    # queue/unsplit reads no vLLM series of its own beyond what its explainers need, and asks for theirs
    unsplit = server_keys(select(("queue/unsplit",)))
    assert server_keys(select(("queue/kv-memory", "queue/compute"))) <= unsplit
    records_only = [c for c in CHECKS if not (set(flat_keys(c.needs)) | set(c.reads)) & set(SERVER_KEYS)]
    assert server_keys(records_only) == set()
