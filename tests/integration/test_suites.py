"""A probe suite from config against a scripted server: every job runs and reaches the sink."""

from __future__ import annotations

import asyncio
import random

import pytest

from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.probe.settings import ProbeConfig, RequestClass, Target
from lanewatch.collector.probe.suites import ProbeSuite
from lanewatch.collector.record.timing import RequestTiming

from .scripted_server import Received, Reply, ScriptedServer, chat_stream

pytestmark = pytest.mark.integration


async def test_suite_probes_every_class_with_deterministic_distinct_prompts() -> None:
    def reply(req: Received) -> Reply:
        return Reply(parts=chat_stream(int(req.json()["max_tokens"])))

    async with ScriptedServer(reply) as srv:
        classes = [
            RequestClass(name="a", max_tokens=2),
            RequestClass(name="b", max_tokens=3, prompt_words=50),
        ]
        cfg = LanewatchConfig(
            targets=[Target(name="sim", url=srv.url(), model="m", lane="fast")],
            probe=ProbeConfig(interval_s=0.1, jitter_ratio=0.1, concurrency=2, classes=classes),
        )
        got: list[RequestTiming] = []
        suite = ProbeSuite(cfg.targets, cfg.probe, got.append, rng=random.Random(3))
        task = asyncio.create_task(suite.run())
        for _ in range(200):
            await asyncio.sleep(0.02)
            if {r.request_class for r in got} == {"a", "b"} and len(got) >= 6:
                break
        suite.shutdown()
        await asyncio.wait_for(task, 5)
    assert {r.request_class for r in got} == {"a", "b"}
    assert all(r.ok and r.lane == "fast" and r.target == "sim" for r in got)
    assert {r.output_tokens for r in got if r.request_class == "b"} == {3}
    prompts = [req.json()["messages"][0]["content"] for req in srv.received]
    assert len(set(prompts)) == len(prompts)  # no two probes share a prefix-cacheable prompt
