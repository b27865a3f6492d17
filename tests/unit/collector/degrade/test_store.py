from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lanewatch.collector.degrade.state import (
    AlertRecord,
    AuditEntry,
    ControllerState,
    LaneSpec,
    Track,
    state_from_json,
    state_to_json,
)
from lanewatch.collector.degrade.store import DB_FILE, StateLocked, Store, StoreError, lock_state_dir


def numbered_state(n: int) -> ControllerState:
    """A state that carries its own number, so a reader can tell which transition it is."""
    track = Track(
        "slow", "shift", n % 2, LaneSpec("fast", 50 + 50 * (n % 2)), float(n), float(n), frozenset({"a"})
    )
    alerts = {"a": AlertRecord("firing", float(n), float(n), "LanewatchTTFTBurnRate", "slow", "shift")}
    return ControllerState(tracks={("slow", "shift"): track}, alerts=alerts)


def test_state_json_round_trip() -> None:
    s = numbered_state(7)
    assert state_from_json(state_to_json(s)) == s
    assert state_from_json(state_to_json(ControllerState())) == ControllerState()
    with pytest.raises(ValueError, match="format"):
        state_from_json('{"format": 99}')


def test_commit_and_reload(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert store.load().revision == 0 and store.load().state == ControllerState()
    entries = [AuditEntry(1.0, "apply", "slow", "shift", {"to": "fast"})]
    assert store.commit(numbered_state(1), entries, at=1.0) == 1
    store.close()
    again = Store(tmp_path)
    snap = again.load()
    assert (snap.revision, snap.state, snap.updated_at) == (1, numbered_state(1), 1.0)
    assert again.recent(10) == [(1, 1, entries[0])]
    mode = sqlite3.connect(tmp_path / DB_FILE).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_failed_commit_leaves_the_old_side(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.commit(numbered_state(1), [AuditEntry(1.0, "apply")], at=1.0)
    bad = AuditEntry(2.0, "apply", detail={"x": object()})  # not JSON: fails inside the transaction
    with pytest.raises(TypeError):
        store.commit(numbered_state(2), [AuditEntry(2.0, "ok"), bad], at=2.0)
    snap = store.load()
    assert (snap.revision, snap.state) == (1, numbered_state(1))
    assert store.audit_count() == 1


def test_audit_log_is_append_only(tmp_path: Path) -> None:
    Store(tmp_path).commit(numbered_state(1), [AuditEntry(1.0, "apply")], at=1.0)
    db = sqlite3.connect(tmp_path / DB_FILE)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("UPDATE audit SET event = 'x'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("DELETE FROM audit")


def test_readonly_open_refuses_missing_and_foreign_databases(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not found"):
        Store(tmp_path / "nowhere", readonly=True)
    Store(tmp_path).close()
    sqlite3.connect(tmp_path / DB_FILE).execute("PRAGMA user_version=42")
    with pytest.raises(StoreError, match="schema version 42"):
        Store(tmp_path, readonly=True)


def test_one_controller_per_state_dir(tmp_path: Path) -> None:
    held = lock_state_dir(tmp_path)
    with pytest.raises(StateLocked):
        lock_state_dir(tmp_path)
    held.close()
    lock_state_dir(tmp_path).close()
