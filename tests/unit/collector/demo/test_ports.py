"""The demo's ports: distinct, free, and outside the range connect() draws source ports from."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from lanewatch.collector.demo.supervisor import PORT_SHARE_ENV, QUIET_FLOOR, _quiet_range, _share, free_ports


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
        monkeypatch.delenv(PORT_SHARE_ENV, raising=False)
        with pytest.raises(OSError, match=f"no 1 free ports found in {taken}-{taken + 1}"):
            free_ports(1)


def test_a_share_is_a_slice_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _share(20000, 32000, "") == (20000, 32000)
    assert _share(20000, 32000, "0/3") == (20000, 24000)
    assert _share(20000, 32000, "2/3") == (28000, 32000)
    assert _share(0, 0, "1/3") == (0, 0)  # not Linux: the kernel's pick, whatever the share
    for bad in ("3/3", "x/3", "1", "1/"):
        with pytest.raises(ValueError, match=PORT_SHARE_ENV):
            _share(20000, 32000, bad)
    with pytest.raises(ValueError, match="would hold 10 ports"):
        _share(20000, 21000, "0/100")
    monkeypatch.setattr("lanewatch.collector.demo.supervisor._quiet_range", lambda: (20000, 32000))
    monkeypatch.setenv(PORT_SHARE_ENV, "1/4")
    assert all(23000 <= p < 26000 for p in free_ports(30))


def test_a_port_handed_out_is_not_handed_out_again_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    # a range of 200 ports, drawn 150 at a time without binding any: no port twice
    monkeypatch.setattr("lanewatch.collector.demo.supervisor._quiet_range", lambda: (40000, 40200))
    monkeypatch.delenv(PORT_SHARE_ENV, raising=False)
    first = free_ports(100)
    second = free_ports(50)
    assert not set(first) & set(second)
