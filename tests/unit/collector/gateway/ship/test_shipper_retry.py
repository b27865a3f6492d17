"""A batch the gateway sends again after losing the answer is acknowledged, not counted twice.

Reproduces what once went wrong: the collector took a batch, the answer never reached the
gateway, the gateway sent it again, and 20 requests became 28 records.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from fastapi.testclient import TestClient

from lanewatch.collector.collect.records_http import RECORDS_PATH
from lanewatch.collector.gateway.ship.shipper import RecordShipper
from tests.unit.collector.collect.test_service import Clock, config, service

from .test_shipper import rec, settle, shipping


class LosesFirstAnswers:
    """Posts to a real collector app; the first `lose` answers never come back (a time-out)."""

    def __init__(self, client: TestClient, lose: int) -> None:
        self.client, self.lose, self.posts = client, lose, 0

    async def __call__(self, body: bytes) -> tuple[int | None, bytes]:
        self.posts += 1
        headers = {"content-type": "application/json"}
        r = await asyncio.to_thread(self.client.post, RECORDS_PATH, content=body, headers=headers)
        if self.posts <= self.lose:
            return None, b""  # the collector took it; the gateway never hears so
        return r.status_code, r.content

    async def close(self) -> None:
        pass


async def test_a_retried_batch_is_counted_once(tmp_path: Path) -> None:
    svc, seen = service(config(tmp_path), Clock())
    post = LosesFirstAnswers(TestClient(svc.app()), lose=2)
    shipper = RecordShipper(shipping(batch_records=10, queue_records=100, retry_initial_s=0.01), post)
    shipper.start()
    for i in range(20):
        shipper.append(rec(i, trace_id=None))
    await settle(lambda: shipper.stats.shipped == 20)
    await shipper.shutdown()
    assert post.posts >= 3 and shipper.stats.send_failures == 2
    assert sorted(r.request_id or "" for r in seen) == sorted(f"r{i}" for i in range(20))  # 20, not 28
