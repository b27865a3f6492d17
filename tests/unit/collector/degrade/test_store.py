from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from typing import Literal

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
from lanewatch.collector.degrade.store import (
    DB_FILE,
    StateLocked,
    Store,
    StoreError,
    alert_changes,
    lock_state_dir,
)


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


def many_alerts(n: int, status: Literal["firing", "resolved"] = "firing") -> dict[str, AlertRecord]:
    """n alert records as a big firing group leaves them."""
    return {
        f"{i:016x}": AlertRecord(status, 1.0, 2.0, "LanewatchTTFTBurnRate", "slow", "shift") for i in range(n)
    }


def wal_bytes(state_dir: Path) -> int:
    wal = state_dir / f"{DB_FILE}-wal"
    return wal.stat().st_size if wal.exists() else 0


def test_a_commit_writes_the_alerts_that_changed_not_every_alert(tmp_path: Path) -> None:
    big = ControllerState(tracks=numbered_state(1).tracks, alerts=many_alerts(3500))
    store = Store(tmp_path)
    store.commit(big, [AuditEntry(1.0, "fired")], at=1.0)
    store.close()  # the last connection closing checkpoints and empties the WAL
    store = Store(tmp_path)
    assert wal_bytes(tmp_path) == 0
    alerts = dict(big.alerts)
    alerts["0000000000000001"] = AlertRecord("resolved", 1.0, 3.0, "LanewatchTTFTBurnRate")
    del alerts["0000000000000002"]
    changed = ControllerState(tracks=big.tracks, alerts=alerts)
    store.commit(changed, [AuditEntry(3.0, "resolved")], at=3.0)
    # the whole state as one document is ~0.5 MB; the change is a few pages
    assert 0 < wal_bytes(tmp_path) < 64 * 1024
    store.close()
    snap = Store(tmp_path).load()
    assert (snap.revision, snap.state) == (2, changed)


def test_alert_changes_names_only_what_differs() -> None:
    stored = many_alerts(4)
    wanted = dict(stored)
    wanted["0000000000000000"] = AlertRecord("resolved", 1.0, 3.0, "X")
    wanted["00000000000000ff"] = AlertRecord("firing", 5.0, 5.0, "Y", "fast", "protect")
    del wanted["0000000000000003"]
    wanted["0000000000000001"] = AlertRecord(**{**vars(stored["0000000000000001"])})  # equal, not identical
    upserts, deletes = alert_changes(stored, wanted)
    assert [fp for fp, _ in upserts] == ["0000000000000000", "00000000000000ff"]
    assert deletes == ["0000000000000003"]
    assert alert_changes(stored, stored) == ([], [])


def test_a_version_1_state_is_migrated_in_place(tmp_path: Path) -> None:
    state = ControllerState(tracks=numbered_state(5).tracks, alerts=many_alerts(3))
    db = sqlite3.connect(tmp_path / DB_FILE, isolation_level=None)
    db.execute("CREATE TABLE state (id INTEGER PRIMARY KEY, revision INTEGER, body TEXT, updated_at REAL)")
    db.execute(
        "CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, revision INTEGER, at REAL, event TEXT,"
        " lane TEXT, action TEXT, detail TEXT)"
    )
    db.execute("INSERT INTO state VALUES (1, 5, ?, 5.0)", (state_to_json(state),))
    db.execute("INSERT INTO audit (revision, at, event, detail) VALUES (5, 5.0, 'apply', '{}')")
    db.execute("PRAGMA user_version=1")
    db.close()
    store = Store(tmp_path)
    snap = store.load()
    assert (snap.revision, snap.state, snap.updated_at) == (5, state, 5.0)
    assert store.audit_count() == 1
    store.close()
    check = sqlite3.connect(tmp_path / DB_FILE)
    assert check.execute("PRAGMA user_version").fetchone()[0] == 2
    assert check.execute("SELECT COUNT(*) FROM alert").fetchone()[0] == 3
    assert '"alerts": {}' in check.execute("SELECT body FROM state").fetchone()[0]


def test_the_state_files_are_created_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask would leave them world-readable
    try:
        lock = lock_state_dir(tmp_path / "state")
        store = Store(tmp_path / "state")
        store.commit(numbered_state(1), [AuditEntry(1.0, "apply")], at=1.0)
        names = sorted(p.name for p in (tmp_path / "state").iterdir())
        assert names == sorted([DB_FILE, f"{DB_FILE}-shm", f"{DB_FILE}-wal", "degrade.lock"])
        modes = {name: stat.S_IMODE((tmp_path / "state" / name).stat().st_mode) for name in names}
        assert modes == dict.fromkeys(names, 0o600)
        assert (tmp_path / "state" / "degrade.lock").read_text() == f"{os.getpid()}\n"
        store.close()
        lock.close()
    finally:
        os.umask(old)
