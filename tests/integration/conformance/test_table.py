"""The conformance table itself (pure): every declared gap shows in some row, the doc is current."""

from __future__ import annotations

from lanewatch.collector.degrade.adapters import REGISTRY
from lanewatch.collector.degrade_state.wire import LaneDegrade

from .doc import DOC, declarations, render
from .routers import NOT_ROUTERS, ROUTERS
from .rows import GAPS, REFERENCE, ROWS, Declared, Request, exercised, expect, share_bounds


def test_every_adapter_kind_joins_the_suite_or_says_why_not() -> None:
    assert not set(ROUTERS) & set(NOT_ROUTERS)
    assert set(ROUTERS) | set(NOT_ROUTERS) == set(REGISTRY.kinds())


def test_every_declared_gap_is_a_named_one_and_shows_in_some_row() -> None:
    for kind, declared in declarations().items():
        assert declared.gaps <= set(GAPS), f"{kind} declares gaps rows.GAPS does not name"
        missing = {c for c in REFERENCE.capabilities if c not in declared.capabilities}
        shown = set().union(*(exercised(row, declared) for row in ROWS))
        # a declaration no row shows is stale, or a row is missing: either way the doc would lie
        assert shown == declared.gaps | missing, (
            f"{kind}: declared but never shown: {declared.gaps | missing - shown}"
        )


def test_the_reference_declares_nothing_and_a_declared_gap_changes_what_the_user_sees() -> None:
    assert all(exercised(row, REFERENCE) == frozenset() for row in ROWS)
    state = {"fast": LaneDegrade(shed_classes=("long",))}
    req = Request("long", lane="fast", model="small", max_tokens=1000)
    assert expect(state, req, REFERENCE).status == 429
    blind = Declared(REFERENCE.capabilities, frozenset({"class_by_max_tokens"}))
    assert expect(state, req, blind).status == 200  # unclassed, so served undegraded


def test_a_shifted_request_obeys_the_serving_lanes_shed_and_cap() -> None:
    state = {
        "slow": LaneDegrade(shift_to="fast", shift_percent=100),
        "fast": LaneDegrade(cap_max_tokens=3, shed_classes=("batch",)),
    }
    shed = expect(state, Request("batch", tier="batch"), REFERENCE)
    assert (shed.status, dict(shed.headers)["x-lanewatch-degraded"]) == (429, "shift,shed")
    served = expect(state, Request("interactive"), REFERENCE)
    assert (served.lane, served.model, served.max_tokens) == ("fast", "small", 3)


def test_the_share_margin_holds_the_reference_share_and_refuses_a_half_shift() -> None:
    lo, hi = share_bounds(200, 0.5)
    assert 0.3 < lo < 0.5 < hi < 0.7
    assert not lo <= 0.25 <= hi


def test_row_names_are_unique_and_every_router_runs_every_row() -> None:
    assert len({row.name for row in ROWS}) == len(ROWS)
    assert set(ROUTERS) == set(declarations())
    assert all(set(entry.xfail) <= {row.name for row in ROWS} for entry in ROUTERS.values())


def test_the_committed_doc_is_the_generated_one() -> None:
    assert DOC.read_text() == render(declarations()), (
        "docs/routers/conformance.md is stale: python -m tests.integration.conformance.doc"
    )


def test_the_reference_classes_and_caps_a_requests_work() -> None:
    shed = {"fast": LaneDegrade(shed_classes=("long",))}
    assert (
        expect(shed, Request("n", lane="fast", model="small", n=16, max_tokens=100), REFERENCE).status == 429
    )
    assert (
        expect(shed, Request("n", lane="fast", model="small", n=9, max_tokens=100), REFERENCE).status == 200
    )
    listed = Request("list", path="/v1/completions", model="small", prompts=50, max_tokens=20)
    assert expect(shed, listed, REFERENCE).status == 429
    cap = {"slow": LaneDegrade(cap_max_tokens=64)}
    assert expect(cap, Request("n", n=64, max_tokens=64), REFERENCE).max_tokens == 1
    refused = expect(cap, Request("n", n=65, max_tokens=1), REFERENCE)
    assert (refused.status, dict(refused.headers)["x-lanewatch-degraded"]) == (429, "cap_max_tokens")
