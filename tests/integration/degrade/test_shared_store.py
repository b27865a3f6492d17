"""The pair's shared store on a real PostgreSQL: one leader at a time, fenced writes, the inbox."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from lanewatch.collector.degrade.shared_store import Deposed, InboxFull, SharedStore, connect
from lanewatch.collector.degrade.state import AuditEntry, ControllerState
from lanewatch.collector.degrade.store import StoreError
from tests.postgres import Cluster


def store(pg: Cluster, me: str, **kw: Any) -> SharedStore:
    return SharedStore(lambda: connect(pg.url, pg.password(), 5.0), me, **kw)


def entry(event: str) -> AuditEntry:
    return AuditEntry(time.time(), event, "slow", "shift", {})


def test_one_leads_at_a_time_and_only_the_leader_writes(fresh: Cluster) -> None:
    a, b = store(fresh, "a"), store(fresh, "b")
    lease = a.take_lease("http://a", 30.0)
    assert lease is not None and lease.holder == "a" and lease.term == 1 and lease.live
    assert b.take_lease("http://b", 30.0) is None and b.term is None
    assert a.commit(ControllerState(), [entry("apply")], time.time()) == 1
    with pytest.raises(Deposed, match="does not lead"):
        b.commit(ControllerState(), [entry("apply")], time.time())
    renewed = a.take_lease("http://a", 30.0)
    assert renewed is not None and renewed.term == 1  # a renewal keeps the term
    seen = b.lease()
    assert seen is not None and seen.holder == "a" and seen.url == "http://a"
    assert a.load().revision == b.load().revision == 1


def test_a_lapsed_leader_is_fenced_and_revisions_keep_rising(fresh: Cluster) -> None:
    a, b = store(fresh, "a"), store(fresh, "b")
    assert a.take_lease("http://a", 0.3) is not None
    assert a.commit(ControllerState(), [entry("apply")], time.time()) == 1
    time.sleep(0.5)  # a stalls past its lease
    taken = b.take_lease("http://b", 30.0)
    assert taken is not None and taken.term == 2
    assert b.load().revision == 1
    assert b.commit(ControllerState(), [entry("restore")], time.time()) == 2
    with pytest.raises(Deposed, match="term 1"):
        a.commit(ControllerState(), [entry("apply")], time.time())
    with pytest.raises(Deposed):
        a.append([entry("note")])
    assert a.take_lease("http://a", 30.0) is None  # b holds it, live
    assert [(r, t, e) for r, t, e, _ in b.audit_terms()] == [(1, 1, "apply"), (2, 2, "restore")]


def test_a_leader_that_resigns_hands_over_at_once(fresh: Cluster) -> None:
    a, b = store(fresh, "a"), store(fresh, "b")
    assert a.take_lease("http://a", 30.0) is not None
    a.resign()
    taken = b.take_lease("http://b", 30.0)
    assert taken is not None and taken.term == 2


def test_racing_controllers_make_the_schema_once_and_one_wins_the_lease(fresh: Cluster) -> None:
    won: list[str] = []
    errors: list[BaseException] = []

    def race(me: str) -> None:
        try:
            s = store(fresh, me)
            if s.take_lease(f"http://{me}", 30.0) is not None:
                won.append(me)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(f"c{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(won) == 1


def test_the_inbox_keeps_what_waits_for_a_leader_within_its_bound(fresh: Cluster) -> None:
    a, b = store(fresh, "a"), store(fresh, "b")
    first = b.enqueue(b'{"n": 1}', time.time(), limit=2)
    b.enqueue(b'{"n": 2}', time.time(), limit=2)
    with pytest.raises(InboxFull, match="2 notifications"):
        b.enqueue(b'{"n": 3}', time.time(), limit=2)
    waiting = a.inbox(10)
    assert [body for _, body in waiting] == [b'{"n": 1}', b'{"n": 2}'] and waiting[0][0] == first
    a.done([first])
    assert [body for _, body in a.inbox(10)] == [b'{"n": 2}']


def test_the_audit_log_is_append_only(fresh: Cluster) -> None:
    a = store(fresh, "a")
    assert a.take_lease("http://a", 30.0) is not None
    a.append([entry("note")])
    db = connect(fresh.url, fresh.password(), 5.0)
    for statement in ("UPDATE lanewatch_audit SET event = 'x'", "DELETE FROM lanewatch_audit"):
        with pytest.raises(Exception, match="append-only"):
            db.execute(statement)
    assert a.audit_count() == 1


def test_status_reads_a_store_without_tables_as_an_error(fresh: Cluster) -> None:
    with pytest.raises(StoreError, match="no lanewatch tables"):
        store(fresh, "reader", readonly=True)


def test_a_wrong_password_is_refused_without_echoing_it(pg: Cluster) -> None:
    with pytest.raises(StoreError) as caught:
        connect(pg.url, "not-the-password-0123", 5.0)
    assert "not-the-password-0123" not in str(caught.value) and "password" in str(caught.value)
