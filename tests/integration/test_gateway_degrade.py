"""The admin API (docs/gateway.md) and degrade state applied on the data path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from .gateway_harness import (
    TRUST_LOOPBACK,
    RunningGateway,
    chat_body,
    gateway_server,
    one_lane,
    upstream_server,
)

pytestmark = pytest.mark.integration
TOKEN = "s3cret-token"
OPEN_AND_TRUSTED = {"admin_insecure": True, "hints": TRUST_LOOPBACK}  # admin API without a token; hints
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


async def _put(
    s: aiohttp.ClientSession, g: RunningGateway, body: Any, headers: dict[str, str] = AUTH
) -> tuple[int, Any]:
    async with s.put(f"{g.url}/admin/degrade", json=body, headers=headers) as r:
        return r.status, await r.json()


async def test_admin_api_off_without_a_token_file() -> None:
    async with (
        upstream_server() as (_u, url),
        gateway_server({"slow": [url]}) as g,
        aiohttp.ClientSession() as s,
    ):
        async with s.get(f"{g.url}/admin/degrade") as r:
            assert r.status == 403
        status, _ = await _put(s, g, {"lanes": {}}, headers={})
        assert status == 403


async def test_admin_api_insecure_when_asked() -> None:
    async with one_lane(admin_insecure=True) as (_up, g, s), s.get(f"{g.url}/admin/degrade") as r:
        assert r.status == 200


async def test_admin_api_auth_validation_and_versions(tmp_path: Path) -> None:
    dead = ["http://127.0.0.1:9"]  # declared models: a shift needs the target lane's models known
    lanes = {"fast": {"upstreams": dead, "models": ["small"]}, "slow": {"upstreams": dead, "models": ["big"]}}
    async with (
        gateway_server(lanes, admin_token_file=_token_file(tmp_path)) as g,
        aiohttp.ClientSession() as s,
    ):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            async with s.get(f"{g.url}/admin/degrade", headers=headers) as r:
                assert r.status == 401 and r.headers["WWW-Authenticate"] == "Bearer"
        async with s.get(f"{g.url}/admin/degrade", headers=AUTH) as r:
            assert await r.json() == {
                "lanes": {},
                "lane_order": ["fast", "slow"],
                "version": 0,
                "revision": None,
                "models": {
                    "fast": {"source": "declared", "models": ["small"]},
                    "slow": {"source": "declared", "models": ["big"]},
                },
            }
        want = {"slow": {"shift_to": "fast", "shift_percent": 50, "cap_max_tokens": None, "shed_classes": []}}
        status, state = await _put(s, g, {"lanes": want})
        assert (status, state["lanes"], state["version"]) == (200, want, 1)
        status, state = await _put(s, g, {"lanes": want})  # idempotent
        assert (status, state["version"]) == (200, 1)
        bad_bodies = [
            {"lanes": {"turbo": {}}},
            {"lanes": {"fast": {"shift_to": "slow", "shift_percent": 10}}},
            {"lanes": {"slow": {"shift_to": "fast", "shift_percent": 150}}},
            {"lanes": {"slow": {"cap_max_tokens": 0}}},
        ]
        for bad in bad_bodies:
            status, err = await _put(s, g, bad)
            assert status == 400 and err["error"]["message"], bad
        async with s.put(f"{g.url}/admin/degrade", data=b"{not json", headers=AUTH) as r:
            assert r.status == 400
        status, _ = await _put(s, g, {"lanes": {}}, headers={"Authorization": "Bearer nope"})
        assert status == 401
        async with s.get(f"{g.url}/admin/degrade", headers=AUTH) as r:
            after = await r.json()
        assert (after["lanes"], after["version"]) == (want, 1)  # nothing bad changed anything


async def test_degrade_applied_on_the_data_path() -> None:
    degrade = {
        "slow": {"shift_to": "fast", "shift_percent": 50, "cap_max_tokens": 5, "shed_classes": ["batch"]}
    }
    served, flags = [], []
    async with (
        upstream_server() as (fast, fast_url),
        upstream_server() as (slow, slow_url),
        gateway_server({"fast": [fast_url], "slow": [slow_url]}, **OPEN_AND_TRUSTED) as g,
        aiohttp.ClientSession() as s,
    ):
        assert (await _put(s, g, {"lanes": degrade}, headers={}))[0] == 200
        for _ in range(10):
            async with s.post(f"{g.url}/v1/chat/completions", json=chat_body(max_tokens=50)) as r:
                assert r.status == 200
                await r.read()
                served.append(r.headers["x-lanewatch-lane"])
                flags.append(r.headers["x-lanewatch-degraded"])
        headers = {"x-lanewatch-class": "batch"}
        async with s.post(f"{g.url}/v1/chat/completions", json=chat_body(), headers=headers) as r:
            assert r.status == 429
            assert int(r.headers["Retry-After"]) > 0
            assert r.headers["x-lanewatch-degraded"] == "shed"
            shed = await r.json()
    assert served.count("fast") == 5 and served.count("slow") == 5  # exactly half, spread
    assert sorted(set(flags)) == ["cap_max_tokens", "shift,cap_max_tokens"]
    bodies = [log.body for log in (*fast.requests.values(), *slow.requests.values())]
    assert all(b["max_tokens"] == 5 for b in bodies)  # capped at the lane's limit
    assert shed["error"]["code"] == 429 and "batch" in shed["error"]["message"]
    assert g.gw.stats.shed[("slow", "batch")] == 1
    assert {r.lane for r in g.records} == {"fast", "slow"}
    assert all(r.attrs["routed_lane"] == "slow" and r.output_tokens == 5 for r in g.records)
