"""The nginx include rendered from the degrade state: exact text, refusals, read-back, settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from lanewatch.collector.degrade.adapters import AdapterError, NginxSettings
from lanewatch.collector.degrade.adapters.nginx import held_state, render_include
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.layout import ROOT

GOLDEN = Path(__file__).parent / "golden"
LANES = ["fast", "slow"]
DEGRADED = {
    "slow": LaneDegrade(shift_to="fast", shift_percent=33.33, shed_classes=("batch",)),
    "fast": LaneDegrade(shed_classes=("batch",)),
}


@pytest.mark.parametrize(
    ("lanes", "golden"), [({}, "nginx-lanes-none.conf"), (DEGRADED, "nginx-lanes-degraded.conf")]
)
def test_render_is_the_golden_text(lanes: dict[str, LaneDegrade], golden: str) -> None:
    assert render_include(lanes, LANES, 30) == (GOLDEN / golden).read_text()


def test_the_shipped_include_is_the_undegraded_render() -> None:
    assert (ROOT / "deploy" / "nginx" / "lanes.conf").read_text() == render_include({}, LANES, 30)


def test_a_full_shift_sends_the_whole_lane_to_the_faster_upstream() -> None:
    text = render_include({"slow": LaneDegrade(shift_to="fast", shift_percent=100)}, LANES, 30)
    assert 'split_clients "${request_id}" $lanewatch_to_slow {\n    * fast;\n}' in text


@pytest.mark.parametrize("lanes", [{}, DEGRADED, {"slow": LaneDegrade(shift_to="fast", shift_percent=5)}])
def test_the_state_line_reads_back(lanes: dict[str, LaneDegrade]) -> None:
    assert held_state(render_include(lanes, LANES, 30)) == lanes


def test_an_include_lanewatch_did_not_write_has_no_state() -> None:
    with pytest.raises(AdapterError, match="no lanewatch state line"):
        held_state("upstream x { server 127.0.0.1:1; }\n")


@pytest.mark.parametrize(
    ("lanes", "message"),
    [
        ({"turbo": LaneDegrade(shed_classes=("batch",))}, "lane 'turbo' is not one of the nginx lanes"),
        ({"slow": LaneDegrade(shift_to="gpu9", shift_percent=5)}, "shift_to: 'gpu9' is not an nginx lane"),
    ],
)
def test_a_state_nginx_cannot_hold_is_refused(lanes: dict[str, LaneDegrade], message: str) -> None:
    with pytest.raises(AdapterError, match=message):
        render_include(lanes, LANES, 30)


@pytest.mark.parametrize(
    "bad",
    [
        {"lanes": []},
        {"lanes": ["a", "a"]},
        {"lanes": ["a-b", "a_b"]},
        {"lanes": ["a;b"]},
        {"class_variable": "$x; return 200"},
        {"check_command": []},
    ],
)
def test_settings_refuse_what_would_break_the_include(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        NginxSettings.model_validate({"kind": "nginx", **bad})
