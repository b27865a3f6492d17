"""The tap's record shipper: batches by count and time, drop-oldest, retry with backoff, flush at close
(what a batch holds and what each answer means: tests/unit/collector/record/test_shipping.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from lanewatch.collector.gateway.settings import ShippingConfig
from lanewatch.collector.gateway.ship.shipper import RecordShipper
from lanewatch.collector.record.batch import parse_batch
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.exporters import names
from lanewatch.exporters.gateway import ShipperCollector


def rec(i: int, **kw: object) -> RequestTiming:
    return RequestTiming(source="tap", target="u", lane="fast", request_class="c", model="m",
                         request_id=f"r{i}", status=200, e2e_s=0.1, **kw)  # type: ignore[arg-type]  # fmt: skip


class FakeCollector:
    """Answers each POST with the next scripted status (then 200) and keeps the accepted records."""

    def __init__(
        self, statuses: list[int | None] | None = None, refuse: frozenset[str] = frozenset()
    ) -> None:
        self.statuses = list(statuses or [])
        self.refuse = refuse  # request ids this collector refuses (as a stricter version would)
        self.batches: list[list[RequestTiming]] = []
        self.posts = 0
        self.closed = False

    async def __call__(self, body: bytes) -> tuple[int | None, bytes]:
        self.posts += 1
        status = self.statuses.pop(0) if self.statuses else 200
        if status != 200:
            return status, b""
        parsed = parse_batch(body)
        kept = [r for r in parsed.records if r.request_id not in self.refuse]
        refused = [
            {"index": i, "field": "request_id", "reason": "refused"}
            for i, r in enumerate(parsed.records)
            if r.request_id in self.refuse
        ]
        self.batches.append(kept)
        answer = {"accepted": len(kept), "refused": refused, "refused_count": len(refused)}
        return status, json.dumps(answer).encode()

    async def close(self) -> None:
        self.closed = True

    @property
    def ids(self) -> list[str | None]:
        return [r.request_id for b in self.batches for r in b]


def shipping(**kw: object) -> ShippingConfig:
    base: dict[str, object] = {"batch_records": 4, "interval_s": 0.05, "queue_records": 10}
    base.update(kw)
    return ShippingConfig.model_validate(base)


async def settle(condition: object, within_s: float = 5.0) -> None:
    for _ in range(int(within_s / 0.005)):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached")


async def test_full_batches_go_at_once_and_a_remainder_after_the_interval() -> None:
    post = FakeCollector()
    shipper = RecordShipper(shipping(interval_s=60.0), post)
    shipper.start()
    for i in range(9):
        shipper.append(rec(i))
    await settle(lambda: len(post.batches) == 2)  # two full batches, well before 60 s
    assert [len(b) for b in post.batches] == [4, 4] and shipper.stats.queued == 1
    await shipper.shutdown()  # the last one at close
    assert post.ids == [f"r{i}" for i in range(9)] and post.closed
    assert shipper.stats.shipped == 9 and sum(shipper.stats.dropped.values()) == 0


async def test_a_lone_record_goes_within_the_interval() -> None:
    post = FakeCollector()
    shipper = RecordShipper(shipping(interval_s=0.05), post)
    shipper.start()
    shipper.append(rec(0))
    await settle(lambda: post.ids == ["r0"], within_s=2.0)
    await shipper.shutdown()


async def test_failed_sends_are_retried_with_backoff_and_the_oldest_dropped_when_full() -> None:
    post = FakeCollector([None, 503, None])
    shipper = RecordShipper(shipping(retry_initial_s=0.02, retry_max_s=0.05), post)
    shipper.start()
    for i in range(14):  # 10 fit; the 4 oldest go
        shipper.append(rec(i))
    await settle(lambda: shipper.stats.shipped == 10)
    assert shipper.stats.send_failures == 3 and post.posts == 3 + 3
    assert shipper.stats.dropped["queue_full"] == 4
    assert post.ids == [f"r{i}" for i in range(4, 14)]  # in order, newest kept
    await shipper.shutdown()


async def test_a_rejected_batch_is_dropped_not_retried() -> None:
    post = FakeCollector([400])
    shipper = RecordShipper(shipping(), post)
    shipper.start()
    for i in range(5):
        shipper.append(rec(i))
    await settle(lambda: shipper.stats.shipped == 1)
    assert shipper.stats.dropped["rejected"] == 4 and shipper.stats.send_failures == 0
    await shipper.shutdown()


async def test_batches_stay_under_their_byte_bound() -> None:
    post = FakeCollector()
    size = len(json.dumps(rec(0).to_json()))
    shipper = RecordShipper(shipping(batch_bytes=max(1024, int(size * 2.5))), post)
    shipper.start()
    for i in range(1, 5):
        shipper.append(rec(i))
    await settle(lambda: shipper.stats.shipped == 4)
    assert all(len(b) <= 2 for b in post.batches) and shipper.stats.dropped["unencodable"] == 0
    await shipper.shutdown()


def test_a_record_the_collector_would_refuse_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="ttft_s"):
        rec(0, ttft_s=float("nan"))


async def test_records_the_collector_refuses_are_dropped_alone() -> None:
    post = FakeCollector(refuse=frozenset({"r1", "r2"}))
    shipper = RecordShipper(shipping(), post)
    shipper.start()
    for i in range(8):
        shipper.append(rec(i))
    await settle(lambda: shipper.stats.shipped == 6)
    assert shipper.stats.dropped["refused"] == 2 and shipper.stats.dropped["rejected"] == 0
    assert post.ids == [f"r{i}" for i in range(8) if i not in (1, 2)]
    await shipper.shutdown()


async def test_close_with_the_collector_down_counts_what_is_left_and_returns_in_time() -> None:
    post = FakeCollector([None] * 1000)
    shipper = RecordShipper(shipping(interval_s=60.0, shutdown_s=0.5), post)
    shipper.start()
    for i in range(3):
        shipper.append(rec(i))
    await asyncio.wait_for(shipper.shutdown(), 5.0)
    assert shipper.stats.dropped["shutdown"] == 3 and shipper.stats.shipped == 0 and post.closed


def test_shipping_metrics() -> None:
    post = FakeCollector()
    shipper = RecordShipper(shipping(), post)
    shipper.stats.shipped, shipper.stats.send_failures = 7, 2
    shipper.stats.dropped["queue_full"] += 3
    shipper.append(rec(0))
    got = {(s.name, tuple(s.labels.values())): s.value for m in ShipperCollector(shipper.stats).collect()
           for s in m.samples}  # fmt: skip
    assert got[(names.GATEWAY_SHIPPED_RECORDS_TOTAL, ())] == 7
    assert got[(names.GATEWAY_SHIP_SEND_FAILURES_TOTAL, ())] == 2
    assert got[(names.GATEWAY_SHIP_DROPPED_RECORDS_TOTAL, ("queue_full",))] == 3
    assert got[(names.GATEWAY_SHIP_DROPPED_RECORDS_TOTAL, ("shutdown",))] == 0
    assert got[(names.GATEWAY_SHIP_QUEUED_RECORDS, ())] == 1


@pytest.mark.parametrize("url", ["http://c:9464", "http://c:9464/", "http://c:9464/v1/records"])
def test_collector_url_is_a_base_url(url: str) -> None:
    from lanewatch.collector.gateway.settings import GatewayConfig

    assert GatewayConfig(collector_url=url).collector_url == "http://c:9464"
    with pytest.raises(ValueError, match="http://"):
        GatewayConfig(collector_url="c:9464")
