"""The hint token is the gateway's credential: no upstream ever sees it.

A trusted client sends `Authorization: Bearer <hint token>` so the gateway takes its class and
lane headers. That header must not go on to the lane's upstream (a lane without `api_key_file`
would otherwise get the gateway's secret), neither with a completion nor with `GET /v1/models`;
any other Authorization a client sends still goes on as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.servers import serve_app

from .gateway_harness import chat_body, gateway_server

pytestmark = pytest.mark.integration
HINT = "hint-token-for-the-gateway-only"
KEY = "lane-api-key"


class RecordingUpstream:
    """An upstream that keeps every request's headers, repeats and all, and answers a small completion."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.seen: list[tuple[str, list[tuple[str, str]]]] = []  # (path, headers as sent)
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self._chat)
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_get("/health", self._ok)

    def authorizations(self, path: str) -> list[list[str]]:
        """Each request to `path`: the Authorization values it came with."""
        return [[v for k, v in heads if k.lower() == "authorization"] for p, heads in self.seen if p == path]

    def _keep(self, request: web.Request) -> None:
        self.seen.append(
            (request.path, [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.raw_headers])
        )

    async def _ok(self, _r: web.Request) -> web.Response:
        return web.Response()

    async def _models(self, request: web.Request) -> web.Response:
        self._keep(request)
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.Response:
        self._keep(request)
        await request.read()
        message = {"role": "assistant", "content": "ok"}
        answer = {"id": "c", "object": "chat.completion", "created": 0, "model": self.model}
        answer["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
        answer["usage"] = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        return web.json_response(answer)


@asynccontextmanager
async def _upstream(model: str) -> AsyncIterator[tuple[RecordingUpstream, str]]:
    up = RecordingUpstream(model)
    runner, url = await serve_app(up.app)
    try:
        yield up, url
    finally:
        await runner.cleanup()


def _secret(tmp_path: Path, name: str, value: str) -> str:
    path = tmp_path / name
    path.write_text(value + "\n")
    return str(path)


async def _chat(s: aiohttp.ClientSession, url: str, headers: dict[str, str] | list[tuple[str, str]]) -> str:
    """One non-streamed chat request; the lane that served it."""
    body = chat_body(stream=False, model="small")
    async with s.post(f"{url}/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        await r.read()
        return r.headers["x-lanewatch-lane"]


async def test_the_hint_token_never_reaches_an_upstream(tmp_path: Path) -> None:
    hints = {"token_file": _secret(tmp_path, "hint.token", HINT)}
    async with (
        _upstream("small") as (fast, fast_url),
        _upstream("big") as (slow, slow_url),
        _upstream("big") as (keyed, keyed_url),
        gateway_server(
            {
                "fast": {"upstreams": [fast_url], "models": ["small"]},
                "slow": {"upstreams": [slow_url], "models": ["big"]},
                "keyed": {
                    "upstreams": [keyed_url],
                    "models": ["big"],
                    "api_key_file": _secret(tmp_path, "k", KEY),
                },
            },
            hints=hints,
            lane_order=["fast", "keyed", "slow"],
            default_lane="slow",
        ) as g,
        aiohttp.ClientSession() as s,
    ):
        # Trusted by its token, the client picks its lane; the token stays at the gateway.
        assert (
            await _chat(s, g.url, {"Authorization": f"Bearer {HINT}", "x-lanewatch-lane": "slow"}) == "slow"
        )
        assert (
            await _chat(s, g.url, {"authorization": f"bearer   {HINT} ", "x-lanewatch-lane": "fast"})
            == "fast"
        )
        assert slow.authorizations("/v1/chat/completions") == [[]]
        assert fast.authorizations("/v1/chat/completions") == [[]]
        # A lane with its own key gets that key, never the token.
        assert (
            await _chat(s, g.url, {"Authorization": f"Bearer {HINT}", "x-lanewatch-lane": "keyed"}) == "keyed"
        )
        assert keyed.authorizations("/v1/chat/completions") == [[f"Bearer {KEY}"]]
        # Sent twice, once with the token: only the other one goes on (and it earns no trust).
        twice = [("Authorization", "Bearer client-own-key"), ("Authorization", f"Bearer {HINT}")]
        assert await _chat(s, g.url, [*twice, ("x-lanewatch-lane", "slow")]) == "fast"
        assert fast.authorizations("/v1/chat/completions")[-1] == ["Bearer client-own-key"]
        # Neither as a bare value (no scheme).
        assert await _chat(s, g.url, {"Authorization": HINT}) == "fast"  # untrusted: routed by served model
        assert fast.authorizations("/v1/chat/completions")[-1] == []
        # A client's own key still goes on to a lane without one, as documented.
        assert await _chat(s, g.url, {"Authorization": "Bearer client-own-key"}) == "fast"
        assert fast.authorizations("/v1/chat/completions")[-1] == ["Bearer client-own-key"]

        # The gateway's /v1/models asks every lane with the client's Authorization: not the token.
        async with s.get(f"{g.url}/v1/models", headers={"Authorization": f"Bearer {HINT}"}) as r:
            assert r.status == 200
            assert {m["id"] for m in (await r.json())["data"]} == {"small", "big"}
        assert fast.authorizations("/v1/models") == slow.authorizations("/v1/models") == [[]]
        assert keyed.authorizations("/v1/models") == [[f"Bearer {KEY}"]]
