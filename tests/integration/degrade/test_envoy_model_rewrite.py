"""A shift through the real Envoy rewrites the moved requests' model, and only theirs.

The lanes serve different models (slow: big-model, fast: small-model). The test upstreams
record each request's body and headers, so what Envoy sent each lane is read there.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from lanewatch.collector.degrade.adapters import AdapterError
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.integration.gateway_harness import chat_body
from tests.sse_upstream import SseUpstream

from .routers import Router
from .traffic import SHIFTED, router_setup

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MODELS = {
    "slow": {"models": ["big-model"]},
    "fast": {
        "models": ["small-model", "small-model-chat"],
        "model_map": {"big-model-chat": "small-model-chat"},
    },
}
HALF = {"slow": LaneDegrade(shift_to="fast", shift_percent=50)}


async def _post(s: aiohttp.ClientSession, router: Router, body: bytes, lane: str = "slow") -> tuple[int, str]:
    headers = {"x-lanewatch-lane": lane, "content-type": "application/json"}
    async with s.post(f"{router.url}/v1/chat/completions", data=body, headers=headers) as r:
        return r.status, await r.text()


def _body(**extra: Any) -> bytes:
    return json.dumps(chat_body(max_tokens=1, stream=False, **{"model": "big-model", **extra})).encode()


def _served(ups: dict[str, SseUpstream], before: dict[str, int]) -> dict[str, list[dict[str, Any]]]:
    logs = {lane: list(up.requests.values())[before[lane] :] for lane, up in ups.items()}
    return {lane: [log.body for log in got] for lane, got in logs.items()}


def _counts(ups: dict[str, SseUpstream]) -> dict[str, int]:
    return {lane: len(up.requests) for lane, up in ups.items()}


async def test_a_full_shift_asks_the_fast_lane_for_its_model_and_a_restore_asks_slow_for_its_own(
    tmp_path: Path,
) -> None:
    async with router_setup("envoy", tmp_path, lanes=MODELS) as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        before = _counts(ups)
        for _ in range(40):
            assert (await _post(s, router, _body()))[0] == 200
        served = _served(ups, before)
        assert len(served["fast"]) >= 38
        assert {b["model"] for b in served["fast"]} == {"small-model"}
        assert all(b["messages"] == chat_body()["messages"] for b in served["fast"])
        await adapter.apply({}, 2)
        before = _counts(ups)
        for _ in range(20):
            assert (await _post(s, router, _body()))[0] == 200
        served = _served(ups, before)
        assert (len(served["slow"]), {b["model"] for b in served["slow"]}) == (20, {"big-model"})


async def test_under_a_half_shift_requests_that_stay_on_slow_are_untouched(tmp_path: Path) -> None:
    async with router_setup("envoy", tmp_path, lanes=MODELS) as (ups, router, adapter, s):
        await adapter.apply(HALF, 1)
        before = _counts(ups)
        for _ in range(60):
            assert (await _post(s, router, _body()))[0] == 200
        served = _served(ups, before)
        assert served["slow"] and served["fast"]  # 60 draws at 50%: both lanes served some
        assert {b["model"] for b in served["slow"]} == {"big-model"}
        assert {b["model"] for b in served["fast"]} == {"small-model"}
        fast_lane_before = _counts(ups)["fast"]
        assert (await _post(s, router, _body(model="anything"), lane="fast"))[0] == 200
        assert ups["fast"].last().body["model"] == "anything"  # the fast lane's own route: no rewrite
        assert _counts(ups)["fast"] == fast_lane_before + 1


async def test_only_the_top_level_model_string_is_replaced_and_the_length_follows(tmp_path: Path) -> None:
    prompt = 'reply with {"model": "big-model"} and the word model'
    raw = (
        '{ "metadata": {"model": "big-model", "note": "\\"model\\": x"},\n'
        f'  "messages": [{{"role": "user", "content": {json.dumps(prompt)}}}],'
        ' "max_tokens": 1, "stream": false, "model" : "big-model", "tail": "é✓"}'
    ).encode()
    async with router_setup("envoy", tmp_path, lanes=MODELS) as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        assert (await _post(s, router, raw))[0] == 200
        got = ups["fast"].last()
        want = json.loads(raw)
        want["model"] = "small-model"
        assert got.body == want
        sent = raw.replace(b'"model" : "big-model"', b'"model" : "small-model"')
        assert int(got.headers["Content-Length"]) == len(sent)


async def test_a_model_key_written_with_escapes_is_the_model_key(tmp_path: Path) -> None:
    async with router_setup("envoy", tmp_path, lanes=MODELS) as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        raw = _body().replace(b'"model": "big-model"', b'"mod\\u0065l": "big-model"')
        assert (await _post(s, router, raw))[0] == 200
        assert ups["fast"].last().body["model"] == "small-model"


@pytest.mark.parametrize(
    ("asked", "served"),
    [
        ("big-model-chat", "small-model-chat"),  # the fast lane's model_map
        ("small-model-chat", "small-model-chat"),  # a model the fast lane serves: as asked
        ("b\\u0069g-model", "small-model"),  # an escaped name is read as JSON reads it
        ('big\\"model', "small-model"),
    ],
)
async def test_the_rewrite_follows_the_fast_lane_models(asked: str, served: str, tmp_path: Path) -> None:
    async with router_setup("envoy", tmp_path, lanes=MODELS) as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        raw = _body().replace(b'"model": "big-model"', f'"model": "{asked}"'.encode())
        assert (await _post(s, router, raw))[0] == 200
        assert ups["fast"].last().body["model"] == served


async def test_a_body_over_the_bound_is_refused_and_one_with_no_model_string_passes(tmp_path: Path) -> None:
    setup = router_setup("envoy", tmp_path, lanes=MODELS, rewrite_max_bytes=2048)
    async with setup as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        before = _counts(ups)
        status, text = await _post(s, router, _body(content="x" * 4096))
        assert status == 413 and "2048 bytes" in json.loads(text)["error"]["message"]
        assert _counts(ups) == before
        assert (await _post(s, router, _body(model=7)))[0] == 200
        assert ups["fast"].last().body["model"] == 7
        async with s.get(f"{router.url}/v1/models", headers={"x-lanewatch-lane": "slow"}) as r:
            assert r.status == 200  # no body: nothing to buffer or rewrite


async def _chunked(s: aiohttp.ClientSession, router: Router, body: bytes) -> int:
    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 1000):
            yield body[i : i + 1000]

    headers = {"x-lanewatch-lane": "slow", "content-type": "application/json"}
    async with s.post(f"{router.url}/v1/chat/completions", data=chunks(), headers=headers) as r:
        await r.read()
        return r.status


async def test_a_chunked_body_is_rewritten_and_bounded_once_buffered(tmp_path: Path) -> None:
    setup = router_setup("envoy", tmp_path, lanes=MODELS, rewrite_max_bytes=4096)
    async with setup as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        assert await _chunked(s, router, _body(content="x" * 2500)) == 200
        assert ups["fast"].last().body["model"] == "small-model"
        before = _counts(ups)
        assert await _chunked(s, router, _body(content="x" * 5000)) == 413
        assert _counts(ups) == before


@pytest.mark.parametrize(
    "raw",
    [
        b"\xef\xbb\xbf" + _body(),  # a UTF-8 byte order mark, which a parser reading bytes reads past
        b'{"\\ud800": 1, ' + _body()[1:],  # a lone surrogate escape in another key
        b'{"\\udc00x": "\\ud83d", ' + _body()[1:],  # a lone low one, and a lone high one in a value
        _body().replace(b'"big-model"', b'"big\\ud800model"'),  # in the model's name itself
    ],
)
async def test_json_a_parser_reads_is_rewritten_however_it_starts_or_escapes(
    raw: bytes, tmp_path: Path
) -> None:
    async with router_setup("envoy", tmp_path, lanes=MODELS) as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        assert (await _post(s, router, raw))[0] == 200
        got = ups["fast"].last()
        assert got.body["model"] == "small-model"
        assert got.raw.startswith(raw[:8])  # every other byte as it was sent


@pytest.mark.parametrize(
    "raw",
    [
        _body().decode().encode("utf-16"),  # JSON in UTF-16 (with its BOM), which Python's json reads
        _body().decode().encode("utf-16-le"),
        _body()[:-1] + b",}",  # opens as an object the walk cannot read
    ],
)
async def test_json_the_rewrite_cannot_read_is_refused_not_sent_on(raw: bytes, tmp_path: Path) -> None:
    async with router_setup("envoy", tmp_path, lanes=MODELS) as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        before = _counts(ups)
        headers = {"x-lanewatch-lane": "slow", "content-type": "application/json"}
        async with s.post(f"{router.url}/v1/chat/completions", data=raw, headers=headers) as r:
            assert (r.status, r.headers["x-lanewatch-degraded"]) == (400, "shift")
            assert "its model cannot be rewritten" in (await r.json())["error"]["message"]
        assert _counts(ups) == before
        await _post(s, router, b'["big-model"]')  # JSON, not an object: no model to rewrite, sent on
        assert (_counts(ups)["fast"], ups["fast"].last().raw) == (before["fast"] + 1, b'["big-model"]')


def _sized(n: int) -> bytes:
    """A chat body of exactly `n` bytes (blanks before its closing brace)."""
    body = _body()
    return body[:-1] + b" " * (n - len(body)) + b"}"


async def _chunked_answer(
    s: aiohttp.ClientSession, router: Router, body: bytes
) -> tuple[int, dict[str, str], str]:
    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 64 * 1024):
            yield body[i : i + 64 * 1024]

    headers = {"x-lanewatch-lane": "slow", "content-type": "application/json"}
    async with s.post(f"{router.url}/v1/chat/completions", data=chunks(), headers=headers) as r:
        return r.status, {k.lower(): v for k, v in r.headers.items()}, await r.text()


@pytest.mark.parametrize("bound", [1024 * 1024, 2 * 1024 * 1024])  # Envoy's listener buffers 1 MiB
async def test_a_body_of_exactly_the_bound_is_rewritten_sent_whole_or_chunked(
    bound: int, tmp_path: Path
) -> None:
    async with router_setup("envoy", tmp_path, lanes=MODELS, rewrite_max_bytes=bound) as (
        ups,
        router,
        adapter,
        s,
    ):
        await adapter.apply(SHIFTED, 1)
        body = _sized(bound)
        assert (await _post(s, router, body))[0] == 200
        got = ups["fast"].last()
        assert (got.body["model"], len(got.raw)) == (
            "small-model",
            bound - len("big-model") + len("small-model"),
        )
        assert (await _chunked_answer(s, router, body))[0] == 200
        assert ups["fast"].last().body["model"] == "small-model"
        status, text = await _post(s, router, _sized(bound + 1))
        assert status == 413 and f"over {bound} bytes" in json.loads(text)["error"]["message"]


@pytest.mark.parametrize("over", [1, 200 * 1024])  # under and over what Envoy buffers on the route
async def test_a_chunked_body_over_the_bound_gets_the_json_refusal(over: int, tmp_path: Path) -> None:
    async with router_setup("envoy", tmp_path, lanes=MODELS) as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        before = _counts(ups)
        status, headers, text = await _chunked_answer(s, router, _sized(1024 * 1024 + over))
        assert (status, headers["content-type"], headers["x-lanewatch-degraded"]) == (
            413,
            "application/json",
            "shift",
        )
        assert json.loads(text)["error"] == {
            "message": "request body over 1048576 bytes: too large to rewrite its model "
            "for the lane it was shifted to",
            "type": "invalid_request_error",
            "code": 413,
        }
        assert _counts(ups) == before
        # an upstream's own 413, once the body was read whole, is passed on as it is
        h = {"x-lanewatch-lane": "slow", "content-type": "application/json", "x-test-status": "413"}
        async with s.post(f"{router.url}/v1/chat/completions", data=_body(), headers=h) as r:
            assert (r.status, (await r.json())["error"]["message"]) == (413, "injected")
            assert "x-lanewatch-degraded" not in r.headers


async def test_a_rewrite_needs_the_lua_filter_in_envoy_listener(tmp_path: Path) -> None:
    async with router_setup("envoy", tmp_path, lanes=MODELS, without_lua=True) as (_ups, _r, adapter, _s):
        with pytest.raises(AdapterError, match="no Lua filter"):
            await adapter.apply(SHIFTED, 1)
        await adapter.apply({"slow": LaneDegrade(shed_classes=("batch",))}, 2)  # no rewrite: applies
