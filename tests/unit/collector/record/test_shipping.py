"""The one core every record sender runs (collector/record/shipping.py): when a batch is due, the
bounded queue, what a batch holds, and what each answer means; pure."""

from __future__ import annotations

import json
from collections import deque

from lanewatch.collector.gateway.settings import ShippingConfig
from lanewatch.collector.record.batch import parse_batch
from lanewatch.collector.record.shipping import (
    DEFAULT_BATCH_BYTES,
    Batch,
    ShipQueue,
    backoff_s,
    due,
    refused_in,
    requeue,
    take,
    verdict,
)
from lanewatch.collector.record.timing import RequestTiming


def rec(i: int) -> RequestTiming:
    return RequestTiming(source="tap", target="u", lane="fast", request_class="c", model="m",
                         request_id=f"r{i}", status=200, e2e_s=0.1)  # fmt: skip


def test_due_by_count_or_by_time_with_something_queued() -> None:
    assert due(256, 0.0, 256, 1.0) and due(1, 1.0, 256, 1.0)
    assert not due(255, 0.5, 256, 1.0) and not due(0, 5.0, 256, 1.0)


def test_take_and_requeue_keep_order_and_drop_the_oldest() -> None:
    q: deque[int] = deque(range(10), maxlen=10)
    batch = take(q, 4)
    assert batch == [0, 1, 2, 3] and list(q) == [4, 5, 6, 7, 8, 9]
    assert requeue(q, batch) == 0 and list(q) == list(range(10))
    batch = take(q, 4)
    q.extend([10, 11, 12])  # the data path went on appending meanwhile: room for one of four
    assert requeue(q, batch) == 3 and list(q) == [3, *range(4, 13)]
    q.extend([13])  # full: the deque itself drops the oldest
    assert q[0] == 4 and take(q, 100) == list(range(4, 14)) and take(q, 1) == []


def test_verdict_and_backoff() -> None:
    assert [verdict(s) for s in (200, 204, None, 500, 503, 429, 408, 400, 401, 413)] == [
        "sent", "sent", "retry", "retry", "retry", "retry", "retry", "rejected", "rejected", "rejected",
    ]  # fmt: skip
    assert [backoff_s(n, 0.2, 1.0) for n in (1, 2, 3, 4, 99)] == [0.2, 0.4, 0.8, 1.0, 1.0]


def test_the_gateways_batches_default_to_the_cores_bound() -> None:
    assert ShippingConfig().batch_bytes == DEFAULT_BATCH_BYTES


def test_a_too_early_answer_is_retried_by_every_sender() -> None:
    # 425 Too Early: the gateway retried it and the LiteLLM handler dropped the batch, each with
    # its own list; one list now serves both.
    assert verdict(425) == "retry"


def test_refused_in_reads_the_answer_and_an_older_collectors_answer() -> None:
    refused = [{"index": 2, "field": "e2e_s", "reason": "negative"}]
    answer = {"accepted": 3, "refused": refused, "refused_count": 1}
    assert refused_in(json.dumps(answer).encode(), 4) == (1, "records[2].e2e_s: negative")
    assert refused_in(b'{"accepted": 4}', 4) == (0, "")  # an older collector took the batch whole
    assert refused_in(b"not json", 4) == (0, "")
    assert refused_in(b'{"refused_count": 99}', 4)[0] == 4  # never more than were sent


def batch_of(q: ShipQueue) -> Batch:
    steps = list(q.encode(q.take()))
    batch = steps[-1]
    assert isinstance(batch, Batch) and all(s is None for s in steps[:-1])
    return batch


def test_the_queue_drops_the_oldest_and_says_when_a_batch_waits() -> None:
    q = ShipQueue(queue_records=3, batch_records=2, batch_bytes=1 << 20)
    assert [q.append(rec(i)) for i in range(4)] == [False, True, False, False]
    assert len(q) == 3 and q.stats.dropped["queue_full"] == 1
    assert [r.request_id for r in q.take()] == ["r1", "r2"]


def test_a_batch_is_what_the_collector_parses_with_stable_ids_and_stays_under_its_bytes() -> None:
    size = len(json.dumps(rec(0).to_json()))
    q = ShipQueue(queue_records=100, batch_records=50, batch_bytes=int(size * 2.5))
    for i in range(20):
        q.append(rec(i % 2))
    batch = batch_of(q)
    assert len(batch.records) == 2 and len(batch.left) == 18  # the rest waits for the next send
    q.put_back(batch.left)
    assert len(q) == 18
    parsed = parse_batch(batch.body())
    assert parsed.records == batch.records and not parsed.refused
    again = parse_batch(Batch(bodies=list(batch.bodies)).body())
    assert parsed.ids == again.ids  # a batch sent again names its records as before


def test_settling_an_answer_ships_drops_or_puts_back() -> None:
    q = ShipQueue(queue_records=10, batch_records=4, batch_bytes=1 << 20)
    for i in range(4):
        q.append(rec(i))
    batch = batch_of(q)
    assert q.settle(batch, None, b"").verdict == "retry" and len(q) == 4 and q.stats.send_failures == 1
    batch = batch_of(q)
    assert [r.request_id for r in batch.records] == ["r0", "r1", "r2", "r3"]  # the same, in order
    refused = (
        b'{"accepted": 3, "refused": [{"index": 1, "field": "e2e_s", "reason": "x"}], "refused_count": 1}'
    )
    outcome = q.settle(batch, 200, refused)
    assert (outcome.verdict, outcome.refused, outcome.why) == ("sent", 1, "records[1].e2e_s: x")
    assert q.stats.shipped == 3 and q.stats.dropped["refused"] == 1 and len(q) == 0
    q.append(rec(9))
    assert q.settle(batch_of(q), 400, b"").verdict == "rejected" and q.stats.dropped["rejected"] == 1
    q.append(rec(10))
    assert q.drain("shutdown") == 1 and q.stats.dropped["shutdown"] == 1 and len(q) == 0
