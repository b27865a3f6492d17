"""The fault body's validation and the seeded draws."""

from __future__ import annotations

import pytest

from lanewatch.simulator.faults import FaultError, FaultState, parse_faults


def test_empty_body_means_no_faults() -> None:
    state = FaultState(parse_faults({}))
    draw = state.draw()
    assert draw.error_status is None and draw.stall_after is None and draw.truncate_after is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decode_slowdown": 0}, "decode_slowdown"),
        ({"queue_delay_s": -1}, "queue_delay_s"),
        ({"error_rates": {"404": 0.5}}, "error_rates"),
        ({"error_rates": {"429": 0.7, "500": 0.7}}, "add up"),
        ({"stall_rate": 2}, "stall_rate"),
        ({"nonsense": 1}, "nonsense"),
        ({"tls_handshake_delay_s": -0.1}, "tls_handshake_delay_s"),
        ({"tls_handshake_delay_s": 61}, "tls_handshake_delay_s"),
        ({"frontend_delay_s": -1}, "frontend_delay_s"),
    ],
)
def test_bad_bodies_name_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(FaultError, match=field):
        parse_faults(body)


def test_the_slow_handshake_and_front_end_are_off_by_default_and_set_in_seconds() -> None:
    assert parse_faults({}).tls_handshake_delay_s == 0
    assert parse_faults({}).frontend_delay_s == 0
    assert parse_faults({"frontend_delay_s": 0.4}).frontend_delay_s == 0.4
    assert parse_faults({"tls_handshake_delay_s": 0.25}).tls_handshake_delay_s == 0.25


def test_not_an_object() -> None:
    with pytest.raises(FaultError, match="JSON object"):
        parse_faults([1, 2])


def test_error_rates_hit_their_share_reproducibly() -> None:
    spec = parse_faults({"error_rates": {"429": 0.2, "503": 0.3}})
    state = FaultState(spec, seed=5)
    statuses = [state.draw().error_status for _ in range(4000)]
    assert 0.17 < statuses.count(429) / 4000 < 0.23
    assert 0.27 < statuses.count(503) / 4000 < 0.33
    again = FaultState(spec, seed=5)
    assert [again.draw().error_status for _ in range(4000)] == statuses


def test_stream_faults_carry_their_positions() -> None:
    spec = parse_faults(
        {"stall_s": 0.5, "stall_after_tokens": 3, "truncate_after_tokens": 9, "malformed_after_tokens": 2}
    )
    draw = FaultState(spec).draw()
    assert (draw.stall_after, draw.stall_s, draw.truncate_after, draw.malformed_after) == (3, 0.5, 9, 2)
