"""The adapters against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from lanewatch.collector.degrade.adapters import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    AdapterError,
    GatewayAdapter,
    Retry,
    WebhookAdapter,
)
from lanewatch.collector.degrade.state import LaneSpec
from tests.servers import serve_app

from .gateway_admin import start_gateway_admin
from .loopback import free_port

pytestmark = pytest.mark.integration

TOKEN = "gw-token-31a8"
FAST = Retry(attempts=3, backoff_s=0.01)
SHIFT = {"slow": LaneSpec("fast", 50)}
PROTECT = {"fast": LaneSpec(cap_max_tokens=128, shed_classes=("batch",))}


async def test_gateway_adapter_sets_and_clears_the_state() -> None:
    with start_gateway_admin(TOKEN) as gw:
        a = GatewayAdapter(gw.url, TOKEN, retry=FAST)
        await a.apply({**SHIFT, **PROTECT}, 1)
        got = await a.read_back()  # what the gateway actually holds
        assert got.lane_order == ("fast", "slow") and got.version == 1
        assert got.lanes == {**SHIFT, **PROTECT}
        await a.apply({**SHIFT, **PROTECT}, 1)  # idempotent: same state, no new version
        assert gw.snapshot()["version"] == 1
        await a.finalize(2)  # the gateway as it started: no degrade anywhere
        assert gw.snapshot()["lanes"] == {} and gw.snapshot()["version"] == 2
        assert (await a.read_back()).lanes == {}
        await a.shutdown()


async def test_gateway_refusal_is_not_retried_and_changes_nothing() -> None:
    with start_gateway_admin(TOKEN) as gw:
        a = GatewayAdapter(gw.url, TOKEN, retry=FAST)
        await a.apply(SHIFT, 1)
        with pytest.raises(AdapterError, match="not faster") as info:
            await a.apply({"fast": LaneSpec("slow", 50)}, 2)  # policy and gateway disagree on order
        assert not info.value.retryable
        assert len(gw.puts) == 1 and gw.snapshot()["lanes"]["slow"]["shift_percent"] == 50
        with pytest.raises(AdapterError, match="HTTP 401"):
            await GatewayAdapter(gw.url, "wrong", retry=FAST).apply(SHIFT, 3)
        await a.shutdown()


async def test_gateway_adapter_retries_through_5xx() -> None:
    with start_gateway_admin(TOKEN) as gw:
        gw.fail_next.extend([503, 502])
        await GatewayAdapter(gw.url, TOKEN, retry=FAST).apply(SHIFT, 1)
        assert gw.snapshot()["lanes"]["slow"]["shift_percent"] == 50


async def test_gateway_down_is_an_adapter_error() -> None:
    a = GatewayAdapter(f"http://127.0.0.1:{free_port()}", TOKEN, retry=FAST, timeout_s=1)
    with pytest.raises(AdapterError, match="ConnectError") as info:
        await a.apply(SHIFT, 1)
    assert info.value.retryable and TOKEN not in str(info.value)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A router's webhook endpoint that checks the signature as a receiver should."""
    got: list[dict[str, Any]] = []
    key = b"shared-key"

    async def hook(request: web.Request) -> web.Response:
        raw = await request.read()
        stamp = request.headers[TIMESTAMP_HEADER]
        want = "sha256=" + hmac.new(key, stamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(request.headers.get(SIGNATURE_HEADER, ""), want):
            return web.Response(status=401)
        got.append(json.loads(raw))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner, url = await serve_app(app)
    yield f"{url}/hook", got
    await runner.cleanup()


async def test_webhook_adapter_signature_verifies_at_a_real_receiver(
    receiver: tuple[str, list[dict[str, Any]]],
) -> None:
    url, got = receiver
    await WebhookAdapter(url, b"shared-key", retry=FAST).apply(SHIFT, 7)
    assert got == [{"lanes": {"slow": {"shift_to": "fast", "shift_percent": 50, "cap_max_tokens": None,
                                       "shed_classes": []}}, "revision": 7}]  # fmt: skip
    with pytest.raises(AdapterError, match="HTTP 401"):
        await WebhookAdapter(url, b"other-key", retry=FAST).apply(SHIFT, 8)
    assert len(got) == 1
