"""The controller's state and its append-only audit log, in SQLite (WAL) under the state dir.

A transition writes the new state and its audit entries in one transaction, so a crash at
any point leaves the state on one side of the transition or the other, never between. The
audit table refuses UPDATE and DELETE (triggers): entries are only ever appended.

The state is stored in two parts: the tracks (a few per lane) as one JSON document, and the
alert records (one per fingerprint seen, thousands when a big group fires) as one row each.
A commit rewrites the tracks and only the alert rows that changed, so its cost follows the
size of the change, not the number of alerts remembered.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Protocol

from lanewatch.collector.common.errors import StartupError

from .state import (
    AlertRecord,
    AuditEntry,
    ControllerState,
    alert_from_json,
    alert_to_json,
    state_from_json,
    state_to_json,
)

__all__ = [
    "DB_FILE",
    "Snapshot",
    "StateLocked",
    "StateStore",
    "Store",
    "StoreError",
    "alert_changes",
    "lock_state_dir",
]

DB_FILE = "degrade.sqlite3"
LOCK_FILE = "degrade.lock"
SCHEMA_VERSION = 2
_SCHEMA_V1 = (
    """CREATE TABLE state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        revision INTEGER NOT NULL,
        body TEXT NOT NULL,
        updated_at REAL NOT NULL
    )""",
    """CREATE TABLE audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        revision INTEGER NOT NULL,
        at REAL NOT NULL,
        event TEXT NOT NULL,
        lane TEXT,
        action TEXT,
        detail TEXT NOT NULL
    )""",
    "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit BEGIN SELECT RAISE(ABORT, 'append-only'); END",
    "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'append-only'); END",
)
# Version 2: alert records leave the state document for a row each.
_ALERT_TABLE = "CREATE TABLE alert (fingerprint TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID"
# What each adapter last applied and its last error (for `degrade status`); not part of the
# state, so it needs no schema version: made when missing, absent in an older state dir.
_ADAPTER_TABLE = (
    "CREATE TABLE IF NOT EXISTS adapter (name TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID"
)


class StoreError(StartupError, RuntimeError):
    """The state database cannot be opened or is not one this version understands."""


class StateLocked(StoreError):
    """Another controller holds the state dir."""


@dataclass(frozen=True)
class Snapshot:
    """The stored state and its revision (0 = never written)."""

    revision: int
    state: ControllerState
    updated_at: float


class StateStore(Protocol):
    """Where the controller keeps its state and audit log: SQLite alone, PostgreSQL for a pair."""

    def load(self) -> Snapshot:
        """The current state and its revision."""
        ...

    def commit(self, state: ControllerState, audit: Sequence[AuditEntry], at: float) -> int:
        """Replace the state and append its audit entries atomically; the new revision."""
        ...

    def append(self, audit: Sequence[AuditEntry]) -> None:
        """Append audit entries that change no state."""
        ...

    def note_adapter(self, name: str, report: dict[str, Any]) -> None:
        """Replace what is recorded of adapter `name`."""
        ...

    def adapters(self) -> dict[str, dict[str, Any]]:
        """What each adapter last reported, by name."""
        ...

    def close(self) -> None:
        """Let the store go."""
        ...


class Store:
    """State plus audit log in `<state_dir>/degrade.sqlite3`."""

    def __init__(self, state_dir: Path, *, readonly: bool = False) -> None:
        path = state_dir / DB_FILE
        if readonly:
            if not path.exists():
                raise StoreError(f"no controller state in {state_dir} ({DB_FILE} not found)")
            uri = f"{path.resolve().as_uri()}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, isolation_level=None)
            self._check_schema()
            return
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Created owner-only before SQLite opens it: SQLite gives its -wal and -shm files the
        # database's mode, and the state names alerts and lanes.
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        self._db = sqlite3.connect(path, isolation_level=None, timeout=10.0, check_same_thread=False)
        mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise StoreError(f"{path}: SQLite would not use WAL (journal_mode={mode})")
        self._db.execute("PRAGMA synchronous=FULL")
        self._migrate()

    def _migrate(self) -> None:
        with self._transaction():
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                for statement in (*_SCHEMA_V1, _ALERT_TABLE):  # not executescript: it would commit
                    self._db.execute(statement)
                empty = state_to_json(ControllerState())
                self._db.execute("INSERT INTO state VALUES (1, 0, ?, 0)", (empty,))
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            elif version == 1:  # same state, same revision; the alerts move to their own rows
                self._db.execute(_ALERT_TABLE)
                (body,) = self._db.execute("SELECT body FROM state WHERE id = 1").fetchone()
                state = state_from_json(body)
                self._write_alerts(alert_changes({}, state.alerts))
                tracks_only = state_to_json(replace(state, alerts={}))
                self._db.execute("UPDATE state SET body = ? WHERE id = 1", (tracks_only,))
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._check_schema()
        self._db.execute(_ADAPTER_TABLE)
        self._stored: dict[str, AlertRecord] = dict(self.load().state.alerts)

    def _check_schema(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            hint = (
                "; `lanewatch degrade serve` upgrades it when it starts"
                if 0 < version < SCHEMA_VERSION
                else ""
            )
            raise StoreError(f"state schema version {version}; this lanewatch reads {SCHEMA_VERSION}{hint}")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def load(self) -> Snapshot:
        """The current state and its revision."""
        with self._read():  # the state row and the alert rows of one revision
            revision, body, updated_at = self._db.execute(
                "SELECT revision, body, updated_at FROM state WHERE id = 1"
            ).fetchone()
            rows = self._db.execute("SELECT fingerprint, body FROM alert").fetchall()
        alerts = {fp: alert_from_json(text) for fp, text in sorted(rows)}
        state = replace(state_from_json(body), alerts=alerts)
        return Snapshot(int(revision), state, float(updated_at))

    @contextmanager
    def _read(self) -> Iterator[None]:
        self._db.execute("BEGIN")
        try:
            yield
        finally:
            self._db.execute("COMMIT")

    def commit(self, state: ControllerState, audit: Sequence[AuditEntry], at: float) -> int:
        """Replace the state and append its audit entries atomically; the new revision.

        Only the alert records that differ from the last committed state are written.
        """
        body = state_to_json(replace(state, alerts={}))
        changes = alert_changes(self._stored, state.alerts)
        with self._transaction():
            self._db.execute(
                "UPDATE state SET revision = revision + 1, body = ?, updated_at = ? WHERE id = 1", (body, at)
            )
            self._write_alerts(changes)
            revision = int(self._db.execute("SELECT revision FROM state WHERE id = 1").fetchone()[0])
            self._insert(revision, audit)
        self._stored = dict(state.alerts)
        return revision

    def _write_alerts(self, changes: tuple[list[tuple[str, str]], list[str]]) -> None:
        upserts, deletes = changes
        self._db.executemany("INSERT OR REPLACE INTO alert (fingerprint, body) VALUES (?, ?)", upserts)
        self._db.executemany("DELETE FROM alert WHERE fingerprint = ?", [(fp,) for fp in deletes])

    def append(self, audit: Sequence[AuditEntry]) -> None:
        """Append audit entries that change no state (adapter health, restarts)."""
        with self._transaction():
            revision = int(self._db.execute("SELECT revision FROM state WHERE id = 1").fetchone()[0])
            self._insert(revision, audit)

    def _insert(self, revision: int, audit: Sequence[AuditEntry]) -> None:
        self._db.executemany(
            "INSERT INTO audit (revision, at, event, lane, action, detail) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (revision, e.at, e.event, e.lane, e.action, json.dumps(e.detail, sort_keys=True))
                for e in audit
            ],
        )

    def recent(self, limit: int) -> list[tuple[int, int, AuditEntry]]:
        """The last `limit` audit entries, oldest first, as (seq, revision, entry)."""
        rows = self._db.execute(
            "SELECT seq, revision, at, event, lane, action, detail FROM audit ORDER BY seq DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [
            (seq, rev, AuditEntry(at, event, lane, action, json.loads(detail)))
            for seq, rev, at, event, lane, action, detail in reversed(rows)
        ]

    def note_adapter(self, name: str, report: dict[str, Any]) -> None:
        """Replace what is recorded of adapter `name` (its last apply and last error)."""
        body = json.dumps(report, sort_keys=True)
        self._db.execute("INSERT OR REPLACE INTO adapter (name, body) VALUES (?, ?)", (name, body))

    def adapters(self) -> dict[str, dict[str, Any]]:
        """What each adapter last reported, by name (empty for a state dir from before the table)."""
        try:
            rows = self._db.execute("SELECT name, body FROM adapter ORDER BY name").fetchall()
        except sqlite3.OperationalError:  # no such table: written by an older lanewatch
            return {}
        return {name: json.loads(body) for name, body in rows}

    def audit_count(self) -> int:
        """How many audit entries there are."""
        return int(self._db.execute("SELECT COUNT(*) FROM audit").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def alert_changes(
    stored: dict[str, AlertRecord], wanted: dict[str, AlertRecord]
) -> tuple[list[tuple[str, str]], list[str]]:
    """The alert rows to write ((fingerprint, JSON) pairs) and to delete to go from stored to wanted."""
    # A decision copies the dict and replaces only the records it changes: `is` skips the rest cheaply.
    upserts = [
        (fp, alert_to_json(rec))
        for fp, rec in wanted.items()
        if (old := stored.get(fp)) is not rec and old != rec
    ]
    deletes = [fp for fp in stored if fp not in wanted]
    return upserts, deletes


def lock_state_dir(state_dir: Path) -> IO[str]:
    """Take the state dir for this process (one controller per state dir); keep the handle open."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    handle = os.fdopen(fd, "a+", encoding="utf-8")  # held for the process
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise StateLocked(f"another lanewatch degrade controller uses {state_dir}") from None
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle
