from __future__ import annotations

from lanewatch.collector.gateway.upstream.pool import LanePool, upstream_name


def test_least_outstanding_with_rotating_ties() -> None:
    pool = LanePool.of("fast", ["http://a:1", "http://b:2", "http://c:3"])
    a, b, c = pool.upstreams
    picks = [pool.pick() for _ in range(6)]
    assert {p.name for p in picks if p} == {"a:1", "b:2", "c:3"}  # all idle: ties rotate
    a.outstanding, b.outstanding, c.outstanding = 3, 1, 2
    assert pool.pick() is b
    assert pool.pick(exclude=[b]) is c


def test_passive_ejection_and_return() -> None:
    pool = LanePool.of("fast", ["http://a:1", "http://b:2"], eject_after=2)
    a, b = pool.upstreams
    pool.failed(a)
    assert a.healthy
    pool.failed(a)
    assert not a.healthy
    assert all(pool.pick() is b for _ in range(4))
    pool.checked(a, ok=True)
    assert a.healthy and a.failures == 0


def test_health_check_ejects_and_pool_fails_open() -> None:
    pool = LanePool.of("fast", ["http://a:1"])
    (a,) = pool.upstreams
    pool.checked(a, ok=False)
    assert not a.healthy and pool.healthy_count == 0
    assert pool.pick() is a  # nothing healthy: still try rather than refuse
    assert pool.pick(exclude=[a]) is None


def test_upstream_name() -> None:
    assert upstream_name("https://vllm.internal/") == "vllm.internal:443"
    assert upstream_name("http://127.0.0.1:8001") == "127.0.0.1:8001"
