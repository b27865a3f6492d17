from __future__ import annotations

from pathlib import Path

import pytest

from lanewatch.collector.common.input_files import ConfigError
from lanewatch.collector.degrade.policy import DEFAULT_POLICY, Policy, PolicySpec, ProtectStep, load_policy

REPO = Path(__file__).resolve().parents[4]


def test_default_needs_no_file() -> None:
    p = load_policy(None)
    assert p is DEFAULT_POLICY
    assert p.lane_order == ("fast", "slow")
    assert p.shift_percents == (50, 100)
    assert p.protect_steps == (ProtectStep(256, ("batch",)),)
    assert "LanewatchLaneConvergence" in p.convergence_alerts


def test_documented_default_file_is_the_default() -> None:
    assert load_policy(REPO / "deploy" / "degrade" / "policy.yaml") == DEFAULT_POLICY


def test_empty_file_is_the_default(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("")
    assert load_policy(f) == DEFAULT_POLICY


@pytest.mark.parametrize(
    ("order", "target", "lane", "faster"),
    [
        (("fast", "slow"), "next", "slow", "fast"),
        (("fast", "slow"), "next", "fast", None),
        (("fast", "mid", "slow"), "next", "slow", "mid"),
        (("fast", "mid", "slow"), "fastest", "slow", "fast"),
        (("fast", "mid", "slow"), "fastest", "mid", "fast"),
        (("only",), "next", "only", None),
    ],
)
def test_faster_lane(order: tuple[str, ...], target: str, lane: str, faster: str | None) -> None:
    spec = PolicySpec(lane_order=list(order), shift_target=target)
    assert Policy.from_spec(spec).faster_lane(lane) == faster


def test_hysteresis_overrides_keep_unset_values() -> None:
    p = DEFAULT_POLICY.with_hysteresis(min_hold_s=1.0)
    assert p.min_hold_s == 1.0
    assert p.recovery_stable_s == DEFAULT_POLICY.recovery_stable_s
    assert p.escalation_cooldown_s == DEFAULT_POLICY.escalation_cooldown_s
    assert DEFAULT_POLICY.with_hysteresis(recovery_stable_s=0.0).recovery_stable_s == 0.0


@pytest.mark.parametrize(
    ("text", "path", "line"),
    [
        ("version: 2\n", "version", 1),
        ("shift_percents: [100, 50]\n", "shift_percents", 1),
        ("shift_percents: [0]\n", "shift_percents", 1),
        ("lane_order: [fast, fast]\n", "lane_order", 1),
        ("lane_order: []\n", "lane_order", 1),
        ("lane_order: ['a b']\n", "lane_order.0", 1),
        # the gateway's rules for names (common/validation.py): ':' and upper-case classes are refused
        ("lane_order: [fast, 'a:b']\n", "lane_order.1", 1),
        (
            "lane_order: [fast, slow]\nprotect_steps:\n  - shed_classes: [Batch]\n",
            "protect_steps.0.shed_classes.0",
            3,
        ),
        ("protect_steps:\n  - shed_classes: [batch, batch]\n", "protect_steps.0.shed_classes", 2),
        ("min_hold_s: 1\nprotect_steps:\n  - cap_max_tokens: 0\n", "protect_steps.0.cap_max_tokens", 3),
        ("protect_steps:\n  - {cap_max_tokens: null, shed_classes: []}\n", "protect_steps.0", 2),
        ("shift_target: slowest\n", "shift_target", 1),
        ("min_hold_s: -1\n", "min_hold_s", 1),
        ("bogus: 1\n", "bogus", 1),
    ],
)
def test_bad_policy_names_field_and_line(tmp_path: Path, text: str, path: str, line: int) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_policy(f)
    assert (path, line) in {(i.path, i.line) for i in info.value.issues}, info.value.issues
