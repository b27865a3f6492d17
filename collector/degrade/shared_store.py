"""The state, audit log, leader lease and inbox of a controller pair, in PostgreSQL.

Two controllers share one database; one leads on a lease kept in it (`lanewatch_leader`),
and only the leader's transactions may change the state or the audit log: each takes the
lease row `FOR SHARE` and checks that it is still this controller's, at the term it won and
unexpired by the database's clock, before it writes. A deposed leader's write is refused
(`Deposed`), so no two controllers ever commit the same revision, and revisions keep rising
across leaders (they live in the database, not in a process). The routers refuse a revision
below the one they hold: that is the fence for an apply already under way when the lease ran
out.

The lease uses the database's clock only (`now()`), so the controllers' own clocks need not
agree. A notification that reaches a controller that is not leading waits in the inbox,
whatever happens to the leader meanwhile, and the leader drains it: every decision is
idempotent (a repeated or older alert is a no-op), so a notification handled twice is harmless.

psycopg (3) is imported here only: the lone controller on SQLite needs no driver.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lanewatch.collector.common.errors import UpstreamError

from .state import (
    AlertRecord,
    AuditEntry,
    ControllerState,
    alert_from_json,
    state_from_json,
    state_to_json,
)
from .store import Snapshot, StoreError, alert_changes

if TYPE_CHECKING:
    import psycopg

__all__ = ["Deposed", "InboxFull", "Lease", "SharedStore", "connect"]

SCHEMA_VERSION = 1
# One lock id for the schema's creation: two controllers starting at once create it once.
_MIGRATION_LOCK = 0x6C616E65  # "lane"
_SCHEMA = (
    "CREATE TABLE lanewatch_schema (id int PRIMARY KEY CHECK (id = 1), version int NOT NULL)",
    """CREATE TABLE lanewatch_state (
        id int PRIMARY KEY CHECK (id = 1),
        revision bigint NOT NULL,
        body text NOT NULL,
        updated_at double precision NOT NULL
    )""",
    "CREATE TABLE lanewatch_alert (fingerprint text PRIMARY KEY, body text NOT NULL)",
    "CREATE TABLE lanewatch_adapter (name text PRIMARY KEY, body text NOT NULL)",
    """CREATE TABLE lanewatch_audit (
        seq bigserial PRIMARY KEY,
        revision bigint NOT NULL,
        term bigint NOT NULL,
        at double precision NOT NULL,
        event text NOT NULL,
        lane text,
        action text,
        detail text NOT NULL
    )""",
    """CREATE FUNCTION lanewatch_append_only() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'lanewatch_audit is append-only'; END $$""",
    """CREATE TRIGGER lanewatch_audit_append_only BEFORE UPDATE OR DELETE ON lanewatch_audit
        FOR EACH STATEMENT EXECUTE FUNCTION lanewatch_append_only()""",
    """CREATE TABLE lanewatch_leader (
        id int PRIMARY KEY CHECK (id = 1),
        holder text NOT NULL,
        url text NOT NULL,
        term bigint NOT NULL,
        acquired_at timestamptz NOT NULL,
        renewed_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL
    )""",
    """CREATE TABLE lanewatch_inbox (
        id bigserial PRIMARY KEY,
        at double precision NOT NULL,
        received_by text NOT NULL,
        body bytea NOT NULL
    )""",
)
# Take the lease when it is free or expired, renew it when it is ours: one statement, so two
# controllers racing for it cannot both win. The term rises with every change of holder.
_TAKE = """
INSERT INTO lanewatch_leader AS l (id, holder, url, term, acquired_at, renewed_at, expires_at)
VALUES (1, %(me)s, %(url)s, 1, now(), now(), now() + %(lease_s)s * interval '1 second')
ON CONFLICT (id) DO UPDATE SET
    holder = excluded.holder,
    url = excluded.url,
    term = CASE WHEN l.holder = excluded.holder AND l.term = %(term)s THEN l.term ELSE l.term + 1 END,
    acquired_at = CASE WHEN l.holder = excluded.holder AND l.term = %(term)s
        THEN l.acquired_at ELSE now() END,
    renewed_at = now(),
    expires_at = excluded.expires_at
WHERE (l.holder = excluded.holder AND l.term = %(term)s AND l.expires_at > now()) OR l.expires_at <= now()
RETURNING holder, url, term, extract(epoch FROM acquired_at), extract(epoch FROM expires_at),
    extract(epoch FROM now())
"""
_LEASE = """SELECT holder, url, term, extract(epoch FROM acquired_at), extract(epoch FROM expires_at),
    extract(epoch FROM now()) FROM lanewatch_leader WHERE id = 1"""
_FENCE = """SELECT 1 FROM lanewatch_leader
    WHERE id = 1 AND holder = %s AND term = %s AND expires_at > now() FOR SHARE"""


class Deposed(UpstreamError, RuntimeError):
    """This controller no longer holds the lease at the term it won: it must not write."""


class InboxFull(UpstreamError, RuntimeError):
    """The inbox holds its maximum of notifications waiting for a leader."""


@dataclass(frozen=True)
class Lease:
    """Who leads (or led last), at which term, and until when, by the database's clock (Unix s)."""

    holder: str
    url: str
    term: int
    acquired_at: float
    expires_at: float
    now: float  # the database's clock when this was read

    @property
    def live(self) -> bool:
        """Unexpired when it was read."""
        return self.expires_at > self.now

    def to_json(self) -> dict[str, Any]:
        """The lease as `degrade status --json` and `/healthz` show it."""
        return {
            "holder": self.holder,
            "url": self.url,
            "term": self.term,
            "acquired_at": round(self.acquired_at, 3),
            "expires_in_s": round(self.expires_at - self.now, 3),
        }


def connect(conninfo: str, password: str | None, timeout_s: float) -> psycopg.Connection[Any]:
    """An autocommit connection whose every wait is bounded: connect, statements, a dead peer."""
    import psycopg

    ms = int(timeout_s * 1000)
    try:
        return psycopg.connect(
            conninfo,
            password=password,
            autocommit=True,
            connect_timeout=max(1, int(timeout_s)),
            options=f"-c statement_timeout={ms} -c lock_timeout={ms}",
            tcp_user_timeout=ms,  # a peer that vanished fails the call instead of hanging it
            keepalives=1,
            keepalives_idle=max(1, int(timeout_s)),
            keepalives_interval=1,
            keepalives_count=3,
            application_name="lanewatch-degrade",
        )
    except psycopg.Error as exc:
        # libpq's message names host and port, never the password
        raise StoreError(f"cannot reach the shared store: {str(exc).strip() or type(exc).__name__}") from None


class SharedStore:
    """State, audit log, leader lease and inbox in one PostgreSQL database.

    `term` is the lease this process won (None until it leads); writes to the state and the
    audit log are fenced by it. The adapter reports and the inbox take any controller's write.
    """

    def __init__(
        self, connect: Callable[[], psycopg.Connection[Any]], me: str, *, readonly: bool = False
    ) -> None:
        self._connect = connect
        self._db = connect()
        self.me = me
        self.term: int | None = None
        self._stored: dict[str, AlertRecord] = {}
        if readonly:
            self._check_schema()
        else:
            self._migrate()

    def _live(self) -> psycopg.Connection[Any]:
        """The connection, made again when the last one broke (a restarted or failed-over server);
        StoreError while the store is unreachable."""
        if self._db.closed or self._db.broken:
            self._db = self._connect()
        return self._db

    def _migrate(self) -> None:
        db = self._live()
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            exists = db.execute("SELECT to_regclass('lanewatch_schema') IS NOT NULL").fetchone()
            if not (exists and exists[0]):
                for statement in _SCHEMA:
                    db.execute(statement)
                db.execute("INSERT INTO lanewatch_schema VALUES (1, %s)", (SCHEMA_VERSION,))
                empty = state_to_json(ControllerState())
                db.execute("INSERT INTO lanewatch_state VALUES (1, 0, %s, 0)", (empty,))
        self._check_schema()

    def _check_schema(self) -> None:
        db = self._live()
        exists = db.execute("SELECT to_regclass('lanewatch_schema') IS NOT NULL").fetchone()
        if not (exists and exists[0]):
            raise StoreError(
                "the shared store has no lanewatch tables yet; `lanewatch degrade serve` makes them"
            )
        row = db.execute("SELECT version FROM lanewatch_schema WHERE id = 1").fetchone()
        version = int(row[0]) if row else 0
        if version != SCHEMA_VERSION:
            raise StoreError(f"shared store schema version {version}; this lanewatch reads {SCHEMA_VERSION}")

    # --- the lease -------------------------------------------------------------------------

    def take_lease(self, url: str, lease_s: float) -> Lease | None:
        """Take the lease if free or expired, or renew ours; None when another controller holds it.

        A renewal keeps `term`, also of our own lease that lapsed while nobody took it (nothing
        could be written meanwhile: a write needs a live lease); taking another's raises it. On
        None, `term` is cleared: this controller no longer leads.
        """
        db = self._live()
        row = db.execute(
            _TAKE, {"me": self.me, "url": url, "lease_s": lease_s, "term": self.term or 0}
        ).fetchone()
        if row is None:
            self.term = None
            return None
        lease = _lease(row)
        self.term = lease.term
        return lease

    def lease(self) -> Lease | None:
        """Who holds the lease (or held it last); None when no controller has ever led."""
        db = self._live()
        row = db.execute(_LEASE).fetchone()
        return _lease(row) if row else None

    def resign(self) -> None:
        """Let the lease go now (a clean shutdown), so that the standby need not wait it out."""
        db = self._live()
        if self.term is not None:
            db.execute(
                "UPDATE lanewatch_leader SET expires_at = now() WHERE id = 1 AND holder = %s AND term = %s",
                (self.me, self.term),
            )
            self.term = None

    @contextmanager
    def _fenced(self) -> Iterator[None]:
        """A transaction that writes only while this controller holds the lease it won."""
        db = self._live()
        if self.term is None:
            raise Deposed(f"{self.me} does not lead")
        with db.transaction():
            if db.execute(_FENCE, (self.me, self.term)).fetchone() is None:
                term, self.term = self.term, None
                raise Deposed(f"{self.me} no longer holds the lease of term {term}")
            yield

    # --- state and audit (the Store interface) ---------------------------------------------

    def load(self) -> Snapshot:
        """The current state and its revision, read in one snapshot."""
        db = self._live()
        with db.transaction():
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = db.execute("SELECT revision, body, updated_at FROM lanewatch_state WHERE id = 1").fetchone()
            rows = db.execute("SELECT fingerprint, body FROM lanewatch_alert").fetchall()
        assert row is not None  # made with the schema
        revision, body, updated_at = row
        alerts = {fp: alert_from_json(text) for fp, text in sorted(rows)}
        self._stored = dict(alerts)
        return Snapshot(int(revision), replace(state_from_json(body), alerts=alerts), float(updated_at))

    def commit(self, state: ControllerState, audit: Sequence[AuditEntry], at: float) -> int:
        """Replace the state and append its audit entries in one fenced transaction; the new revision."""
        db = self._live()
        body = state_to_json(replace(state, alerts={}))
        upserts, deletes = alert_changes(self._stored, state.alerts)
        with self._fenced():
            row = db.execute(
                "UPDATE lanewatch_state SET revision = revision + 1, body = %s, updated_at = %s WHERE id = 1 "
                "RETURNING revision",
                (body, at),
            ).fetchone()
            assert row is not None
            revision = int(row[0])
            with db.cursor() as cur:
                cur.executemany(
                    "INSERT INTO lanewatch_alert VALUES (%s, %s) "
                    "ON CONFLICT (fingerprint) DO UPDATE SET body = excluded.body",
                    upserts,
                )
                cur.executemany(
                    "DELETE FROM lanewatch_alert WHERE fingerprint = %s", [(fp,) for fp in deletes]
                )
            self._insert(revision, audit)
        self._stored = dict(state.alerts)
        return revision

    def append(self, audit: Sequence[AuditEntry]) -> None:
        """Append audit entries that change no state, in a fenced transaction."""
        db = self._live()
        with self._fenced():
            row = db.execute("SELECT revision FROM lanewatch_state WHERE id = 1").fetchone()
            assert row is not None
            self._insert(int(row[0]), audit)

    def _insert(self, revision: int, audit: Sequence[AuditEntry]) -> None:
        db = self._live()
        with db.cursor() as cur:
            cur.executemany(
                "INSERT INTO lanewatch_audit (revision, term, at, event, lane, action, detail) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        revision,
                        self.term,
                        e.at,
                        e.event,
                        e.lane,
                        e.action,
                        json.dumps(e.detail, sort_keys=True),
                    )
                    for e in audit
                ],
            )

    def recent(self, limit: int) -> list[tuple[int, int, AuditEntry]]:
        """The last `limit` audit entries, oldest first, as (seq, revision, entry)."""
        db = self._live()
        rows = db.execute(
            "SELECT seq, revision, at, event, lane, action, detail FROM lanewatch_audit "
            "ORDER BY seq DESC LIMIT %s",
            (limit,),
        ).fetchall()
        return [
            (int(seq), int(rev), AuditEntry(at, event, lane, action, json.loads(detail)))
            for seq, rev, at, event, lane, action, detail in reversed(rows)
        ]

    def audit_terms(self) -> list[tuple[int, int, str, str | None]]:
        """Every audit entry's (revision, term, event, lane), in order: what the fleet test checks."""
        db = self._live()
        rows = db.execute("SELECT revision, term, event, lane FROM lanewatch_audit ORDER BY seq").fetchall()
        return [(int(r), int(t), str(e), lane) for r, t, e, lane in rows]

    def note_adapter(self, name: str, report: dict[str, Any]) -> None:
        """Replace what is recorded of adapter `name` (its last apply and last error)."""
        db = self._live()
        db.execute(
            "INSERT INTO lanewatch_adapter VALUES (%s, %s) "
            "ON CONFLICT (name) DO UPDATE SET body = excluded.body",
            (name, json.dumps(report, sort_keys=True)),
        )

    def adapters(self) -> dict[str, dict[str, Any]]:
        """What each adapter last reported, by name."""
        db = self._live()
        rows = db.execute("SELECT name, body FROM lanewatch_adapter ORDER BY name").fetchall()
        return {name: json.loads(body) for name, body in rows}

    def audit_count(self) -> int:
        """How many audit entries there are."""
        db = self._live()
        row = db.execute("SELECT count(*) FROM lanewatch_audit").fetchone()
        return int(row[0]) if row else 0

    # --- the inbox ---------------------------------------------------------------------------

    def enqueue(self, body: bytes, at: float, limit: int) -> int:
        """Keep a notification for the leader; its id. InboxFull when `limit` are waiting."""
        db = self._live()
        row = db.execute(
            "INSERT INTO lanewatch_inbox (at, received_by, body) "
            "SELECT %s, %s, %s WHERE (SELECT count(*) FROM lanewatch_inbox) < %s RETURNING id",
            (at, self.me, body, limit),
        ).fetchone()
        if row is None:
            raise InboxFull(f"{limit} notifications already wait for a leader")
        return int(row[0])

    def inbox(self, limit: int) -> list[tuple[int, bytes]]:
        """The oldest `limit` notifications waiting, as (id, body)."""
        db = self._live()
        rows = db.execute("SELECT id, body FROM lanewatch_inbox ORDER BY id LIMIT %s", (limit,)).fetchall()
        return [(int(i), bytes(b)) for i, b in rows]

    def done(self, ids: Sequence[int]) -> None:
        """Drop handled notifications from the inbox."""
        db = self._live()
        if ids:
            db.execute("DELETE FROM lanewatch_inbox WHERE id = ANY(%s)", (list(ids),))

    def close(self) -> None:
        """Close the connection."""
        self._db.close()


def _lease(row: Sequence[Any]) -> Lease:
    holder, url, term, acquired, expires, now = row
    return Lease(str(holder), str(url), int(term), float(acquired), float(expires), float(now))
