from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable

import httpx
import pytest

from lanewatch.collector.degrade.adapters import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    AdapterError,
    DryRunAdapter,
    GatewayAdapter,
    Retry,
    WebhookAdapter,
    sign,
)
from lanewatch.collector.degrade.state import LaneSpec

TOKEN = "gw-admin-token-5f2c"
KEY = b"hmac-key-9d1e"
LANES = {"slow": LaneSpec("fast", 50), "fast": LaneSpec(cap_max_tokens=256, shed_classes=("batch",))}
WIRE = {
    "lanes": {
        "fast": {"shift_to": None, "shift_percent": 0, "cap_max_tokens": 256, "shed_classes": ["batch"]},
        "slow": {"shift_to": "fast", "shift_percent": 50, "cap_max_tokens": None, "shed_classes": []},
    }
}


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def gateway(
    handler: Callable[[httpx.Request], httpx.Response], sleeps: Sleeps, **kw: object
) -> GatewayAdapter:
    return GatewayAdapter(
        "http://gw.test/",
        TOKEN,
        transport=httpx.MockTransport(handler),
        sleep=sleeps,
        **kw,  # type: ignore[arg-type]
    )


def echo(request: httpx.Request) -> httpx.Response:
    """A gateway that accepts the PUT and answers with the state it now holds."""
    held = json.loads(request.content)
    return httpx.Response(200, json={**held, "lane_order": ["fast", "slow"], "version": 3})


async def test_gateway_puts_the_whole_state_with_bearer_token() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return echo(request)

    a = gateway(handler, Sleeps())
    await a.apply(LANES, revision=4)
    await a.apply({}, revision=5)  # everything restored: an empty lanes object
    await a.shutdown()
    assert [(r.method, r.url.path) for r in seen] == [("PUT", "/admin/degrade")] * 2
    assert seen[0].headers["authorization"] == f"Bearer {TOKEN}"
    # The controller's revision rides along, so the gateway can refuse an older state sent late.
    assert json.loads(seen[0].content) == {**WIRE, "revision": 4}
    assert json.loads(seen[1].content) == {"lanes": {}, "revision": 5}


async def test_gateway_retries_5xx_and_connection_errors_with_backoff() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ConnectError("connection refused")
        if len(calls) == 2:
            return httpx.Response(503, text="draining")
        return echo(request)

    sleeps = Sleeps()
    await gateway(handler, sleeps, retry=Retry(attempts=3, backoff_s=0.1)).apply(LANES, 1)
    assert len(calls) == 3 and sleeps.delays == [0.1, 0.2]


async def test_gateway_gives_up_after_its_attempts() -> None:
    sleeps = Sleeps()
    a = gateway(lambda r: httpx.Response(500, text="boom"), sleeps, retry=Retry(attempts=4, backoff_s=1))
    with pytest.raises(AdapterError, match="HTTP 500: boom") as info:
        await a.apply(LANES, 1)
    assert info.value.retryable and sleeps.delays == [1, 2, 4]


async def test_gateway_does_not_retry_a_400_and_reports_its_reason() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(400, json={"error": "unknown lane 'slow'"})

    with pytest.raises(AdapterError, match="unknown lane") as info:
        await gateway(handler, Sleeps()).apply(LANES, 1)
    assert len(calls) == 1 and not info.value.retryable
    assert TOKEN not in str(info.value)


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, json={"lanes": {}}),  # did not take the state
        httpx.Response(200, text="ok"),  # not JSON
        httpx.Response(200, json=[1]),
        httpx.Response(200, json={"lanes": {"slow": 3}}),
    ],
)
async def test_gateway_answer_must_hold_the_state_sent(answer: httpx.Response) -> None:
    with pytest.raises(AdapterError):
        await gateway(lambda r: answer, Sleeps(), retry=Retry(attempts=1)).apply(LANES, 1)


def test_gateway_repr_hides_the_token() -> None:
    assert TOKEN not in repr(gateway(echo, Sleeps()))


async def test_webhook_posts_signed_json() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    a = WebhookAdapter(
        "http://router.test/hook", KEY, transport=httpx.MockTransport(handler), clock=lambda: 1_800_000_000.5
    )
    await a.apply(LANES, revision=9)
    r = seen[0]
    assert r.method == "POST" and r.headers["content-type"] == "application/json"
    assert json.loads(r.content) == {**WIRE, "revision": 9}
    stamp = r.headers[TIMESTAMP_HEADER]
    assert stamp == "1800000000"
    expected = hmac.new(KEY, f"{stamp}.".encode() + r.content, hashlib.sha256).hexdigest()
    assert r.headers[SIGNATURE_HEADER] == f"sha256={expected}" == sign(KEY, stamp, r.content)
    assert KEY.decode() not in repr(a) and KEY not in r.content


async def test_webhook_retries_then_fails_with_a_timeout() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow router")

    sleeps = Sleeps()
    a = WebhookAdapter("http://router.test/hook", KEY, transport=httpx.MockTransport(handler), sleep=sleeps)
    with pytest.raises(AdapterError, match="timed out"):
        await a.apply(LANES, 1)
    assert sleeps.delays == [0.2, 0.4]


async def test_webhook_without_key_is_unsigned() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200)

    await WebhookAdapter("http://router.test/hook", None, transport=httpx.MockTransport(handler)).apply({}, 1)
    assert SIGNATURE_HEADER not in seen[0].headers


async def test_dry_run_logs_each_new_state_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="lanewatch.degrade.adapters")
    a = DryRunAdapter()
    await a.apply(LANES, 1)
    await a.apply(LANES, 1)  # the reconcile loop re-applies: not logged again
    await a.apply({}, 2)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert '"shift_to": "fast"' in lines[0] and lines[1].endswith('{"lanes": {}}')
