from __future__ import annotations

from pathlib import Path

import pytest

from lanewatch.alerts.duration import format_duration, parse_duration
from lanewatch.alerts.spec import DEFAULT_SPEC, DEMO_SPEC, SpecError, load_spec, parse_spec

MINIMAL = """\
apiVersion: lanewatch/v1
kind: SLOSpec
metadata: {name: mini}
spec:
  slos:
    - name: ttft
      lanes: [fast]
      objective: 99
      latency: {metric: ttft, threshold: 0.5}
"""


def issues(text: str) -> dict[str, int | None]:
    """path -> line of every issue parse_spec reports."""
    with pytest.raises(SpecError) as info:
        parse_spec(text, "spec.yaml")
    return {i.path: i.line for i in info.value.issues}


@pytest.mark.parametrize(
    ("text", "seconds", "canonical"),
    [
        ("5m", 300, "5m"),
        ("1h30m", 5400, "1h30m"),
        ("28d", 2_419_200, "28d"),
        ("1w", 604_800, "7d"),
        ("90s", 90, "1m30s"),
    ],
)
def test_durations_round_trip(text: str, seconds: int, canonical: str) -> None:
    assert parse_duration(text) == seconds
    assert format_duration(seconds) == canonical


@pytest.mark.parametrize("bad", ["", "5", "5x", "m5", "0s", "1.5h", "-1m"])
def test_bad_durations_refused(bad: str) -> None:
    with pytest.raises(ValueError, match=r"duration|longer than zero"):
        parse_duration(bad)


def test_default_spec_maps_the_published_targets() -> None:
    spec = load_spec(DEFAULT_SPEC)
    by_key = {(s.name, s.lane): s for s in spec.slos}
    assert by_key[("ttft", "fast")].threshold_s == 0.5
    assert by_key[("ttft", "slow")].threshold_s == 2.0
    assert by_key[("tpot", "fast")].threshold_s == 0.05
    assert by_key[("ttft", "fast")].objective == 0.99
    assert by_key[("availability", "slow")].objective == 0.999
    assert by_key[("availability", "slow")].error_budget == 0.001
    assert by_key[("ttft", "fast")].alert_name == "LanewatchTTFTBurnRate"
    assert spec.period_s == 28 * 86_400
    page, ticket = spec.burn
    assert (page.severity, ticket.severity) == ("page", "ticket")
    assert [(p.long_s, p.short_s, p.factor) for p in page.pairs] == [(3600, 300, 13.44), (21600, 1800, 5.6)]
    assert [p.factor for p in ticket.pairs] == [2.8, 0.9333]
    assert spec.convergence[0].fast == "fast" and spec.convergence[0].ratio == 0.8


def test_demo_spec_is_time_compressed() -> None:
    spec = load_spec(DEMO_SPEC)
    assert spec.evaluation_interval_s == 1
    page = spec.burn[0]
    assert page.severity == "page" and page.pairs[0].long_s == 60 and page.pairs[0].factor == 13.44
    assert max(p.long_s for b in spec.burn for p in b.pairs) < spec.period_s


def test_wrong_version_is_named_with_its_line() -> None:
    text = MINIMAL.replace("lanewatch/v1", "lanewatch/v2")
    with pytest.raises(SpecError, match=r"unsupported 'lanewatch/v2'; supported: lanewatch/v1, openslo/v1"):
        parse_spec(text, "spec.yaml")
    assert issues(text) == {"apiVersion": 1}


def test_every_field_error_is_reported_with_path_and_line() -> None:
    text = (
        MINIMAL.replace("objective: 99", "objective: 99\n      bogus: 1")
        .replace("metadata: {name: mini}", "metadata: {name: Mini}")
        .replace("threshold: 0.5", "threshold: -1")
    )
    found = issues(text)
    assert found == {"metadata.name": 3, "spec.slos.0.bogus": 9, "spec.slos.0.latency.threshold": 10}


def test_objective_as_ratio_gets_a_hint() -> None:
    with pytest.raises(SpecError, match=r"objective is a percent: write 99 for 0\.99"):
        parse_spec(MINIMAL.replace("objective: 99", "objective: 0.99"), "spec.yaml")


def test_sli_must_be_exactly_one() -> None:
    text = MINIMAL.replace("      latency: {metric: ttft, threshold: 0.5}\n", "")
    with pytest.raises(SpecError, match="exactly one SLI"):
        parse_spec(text, "spec.yaml")


def test_duplicate_slo_per_lane_refused() -> None:
    text = (
        MINIMAL
        + "    - {name: ttft, lanes: [fast], objective: 95, latency: {metric: ttft, threshold: 1.0}}\n"
    )
    with pytest.raises(SpecError, match="'ttft' is declared twice for lane 'fast'"):
        parse_spec(text, "spec.yaml")


def test_unknown_window_set_lists_the_known_ones() -> None:
    text = MINIMAL.replace("spec:\n", "spec:\n  windows: google\n")
    with pytest.raises(
        SpecError, match=r"unknown window set 'google'; windows\.yaml has: demo, standard"
    ) as info:
        parse_spec(text, "spec.yaml")
    assert info.value.issues[0].line == 5


def test_inline_windows_need_a_short_window_shorter_than_the_long() -> None:
    text = MINIMAL.replace(
        "spec:\n", "spec:\n  windows:\n    page:\n      pairs: [{long: 5m, short: 1h, factor: 14}]\n"
    )
    with pytest.raises(SpecError, match="short window 1h must be shorter than long window 5m"):
        parse_spec(text, "spec.yaml")


def test_selector_labels_are_request_labels_only() -> None:
    text = MINIMAL.replace("objective: 99", "objective: 99\n      selector: {lane: x, pod: y}")
    with pytest.raises(SpecError, match=r"selector labels \['lane', 'pod'\] not allowed"):
        parse_spec(text, "spec.yaml")


def test_unknown_error_kind_lists_the_known() -> None:
    text = (
        MINIMAL
        + "    - {name: availability, lanes: [fast], objective: 99.9,\n"
        + "       availability: {excludeErrorKinds: [oops]}}\n"
    )
    with pytest.raises(SpecError, match=r"unknown error kinds \['oops'\]; known: .*client_disconnect"):
        parse_spec(text, "spec.yaml")


def test_yaml_syntax_error_has_a_line() -> None:
    found = issues("apiVersion: lanewatch/v1\nspec: [1,\n")
    assert found["(yaml)"] is not None


def test_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="No such file"):
        load_spec(tmp_path / "slos.yaml")


def test_custom_alert_name_and_selector_carry_through() -> None:
    text = MINIMAL.replace(
        "objective: 99", "objective: 99.5\n      alertName: LanewatchChatTTFT\n      selector: {source: tap}"
    )
    slo = parse_spec(text, "spec.yaml").slos[0]
    assert slo.alert_name == "LanewatchChatTTFT"
    assert slo.selector == (("source", "tap"),)
    assert slo.objective == 0.995


def test_for_may_be_zero_but_windows_may_not() -> None:
    assert parse_duration("0s", allow_zero=True) == 0
    text = MINIMAL.replace(
        "spec:\n",
        "spec:\n  windows:\n    page:\n      for: 0s\n      pairs: [{long: 1h, short: 0s, factor: 14}]\n",
    )
    with pytest.raises(SpecError, match="must be longer than zero"):
        parse_spec(text, "spec.yaml")
    spec = parse_spec(text.replace("short: 0s", "short: 5m"), "spec.yaml")
    assert spec.burn[0].for_s == 0
