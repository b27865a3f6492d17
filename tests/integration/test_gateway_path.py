"""One request walks the gateway's path as its face lists it: a real gateway on 127.0.0.1, built as
`lanewatch gateway` builds it, passes the request through each stage's function, in the face's order.

The face (collector/gateway/__init__.py) names each stage's module and function; a stage that moves,
is renamed, is skipped or runs out of order makes this test fail until the face says so.
"""

from __future__ import annotations

import sys
from types import CodeType, FrameType
from typing import Any

import aiohttp
import pytest

from lanewatch.collector.collect.settings import ExportConfig
from lanewatch.collector.gateway import GatewayServer
from lanewatch.collector.gateway.front.admin import put_degrade
from lanewatch.collector.gateway.processes.serve import build_gateway
from lanewatch.collector.gateway.settings import GatewayConfig
from tests.gateway_path import face_text, stages
from tests.servers import free_port

from .gateway_harness import chat_body, eventually, upstream_server

pytestmark = pytest.mark.integration

OFF_PATH = "off the path"  # a function this request must not reach: the watch sees only what runs


def _watch(codes: dict[CodeType, str], seen: list[str]) -> Any:
    """A profile hook that notes, in order, the first call of each watched function's code."""

    def hook(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            name = codes.get(frame.f_code)
            if name is not None and name not in seen:
                seen.append(name)

    return hook


async def test_one_request_passes_every_stage_of_the_face_in_order() -> None:
    path = stages(face_text())
    assert len(path) >= 7
    codes = {stage.resolve().__code__: stage.name for stage in path}
    codes[put_degrade.__code__] = OFF_PATH
    seen: list[str] = []
    async with upstream_server(first_ms=1.0, gap_ms=1.0) as (_up, url):
        # A collector that is not there: the shipper queues the record (the ship stage) and fails to
        # send it in the background, which the request never waits for.
        cfg = GatewayConfig.model_validate(
            {"lanes": {"slow": {"upstreams": [url]}}, "collector_url": f"http://127.0.0.1:{free_port()}"}
        )
        built = build_gateway(cfg, ExportConfig(), None)
        server = GatewayServer(built.gateway)
        port = await server.start("127.0.0.1", 0)
        try:
            sys.setprofile(_watch(codes, seen))
            try:
                async with (
                    aiohttp.ClientSession() as client,
                    client.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=chat_body()) as resp,
                ):
                    assert resp.status == 200
                    assert b"data: [DONE]" in await resp.read()
                assert await eventually(lambda: len(seen) >= len(path))
            finally:
                sys.setprofile(None)
        finally:
            await server.shutdown()
            built.close_records()
    assert seen == [stage.name for stage in path]  # and never OFF_PATH
