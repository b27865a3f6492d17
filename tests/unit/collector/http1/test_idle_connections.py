"""The kept-alive store the gateway and the prober share: fresh and open reused, the rest closed."""

from __future__ import annotations

from typing import cast

from lanewatch.collector.http1.client import IdleConnections, UpstreamConn

KEY = ("127.0.0.1", 8000, False)


class Conn:
    """What the store reads and sets of a connection."""

    def __init__(self, reusable: bool = True) -> None:
        self.key, self.reusable, self.closed = KEY, reusable, False
        self.idle_since, self.reused, self.sink = 0.0, False, object()
        self.aborted = False

    def abort(self) -> None:
        self.closed = self.aborted = True


def test_the_newest_fresh_open_connection_is_reused_and_the_rest_closed() -> None:
    now = [100.0]
    store = IdleConnections(reuse_s=2.0, clock=lambda: now[0])
    old, gone, new, spent = Conn(), Conn(), Conn(), Conn(reusable=False)
    store.keep(cast(UpstreamConn, old))
    now[0] = 101.5
    store.keep(cast(UpstreamConn, gone))
    store.keep(cast(UpstreamConn, new))
    store.keep(cast(UpstreamConn, spent))
    gone.closed = True  # the server closed it while idle
    assert spent.aborted and new.sink is None
    now[0] = 102.5  # `old` has been idle 2.5 s, the others 1 s
    assert store.take(KEY) is cast(UpstreamConn, new) and new.reused
    assert store.take(KEY) is None and gone.aborted and old.aborted
    assert store.take(("127.0.0.1", 9000, False)) is None


def test_a_limit_keeps_at_most_that_many() -> None:
    store = IdleConnections(reuse_s=30.0, clock=lambda: 0.0)
    conns = [Conn() for _ in range(3)]
    for conn in conns:
        store.keep(cast(UpstreamConn, conn), limit=2)
    assert [c.aborted for c in conns] == [False, False, True]
    store.close()
    assert all(c.aborted for c in conns)
