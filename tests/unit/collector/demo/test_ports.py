"""The demo's ports: distinct, free, and outside the range connect() draws source ports from."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from lanewatch.collector.demo.supervisor import QUIET_FLOOR, _quiet_range, free_ports


def test_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    low, high = _quiet_range()
    ports = free_ports(20)
    assert len(set(ports)) == 20
    if high:
        assert all(low <= p < high for p in ports), ports
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # still free


def test_the_quiet_range_ends_where_the_kernel_s_begins(tmp_path: Path) -> None:
    f = tmp_path / "range"
    f.write_text("32768\t60999\n")
    assert _quiet_range(str(f)) == (QUIET_FLOOR, 32768)
    f.write_text("1024 65535\n")  # nothing left below: the kernel picks
    assert _quiet_range(str(f)) == (0, 0)
    assert _quiet_range(str(tmp_path / "absent")) == (0, 0)


def test_a_taken_port_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        monkeypatch.setattr("lanewatch.collector.demo.supervisor._quiet_range", lambda: (taken, taken + 1))
        with pytest.raises(OSError, match=f"no 1 free ports found in {taken}-{taken + 1}"):
            free_ports(1)
