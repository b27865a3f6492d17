"""The tap against a scripted upstream that writes vLLM 0.32's exact stream frames (all on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from lanewatch.collector.record.timing import ErrorKind
from tests.servers import serve_app

from .gateway_harness import chat_body, gateway_server, read_events

pytestmark = pytest.mark.integration
CHAT = "/v1/chat/completions"
# A tiny model's tokens, one per frame; `error` is a whole token of its vocabulary, sent alone.
TOKENS = ["The", " cat", "error", " sat", ".", "error", " It", " was", " an", " error", "!", " End"]
HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"tiny"'


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One chunk as vLLM writes it: pydantic's model_dump_json(exclude_unset=True)."""
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return f'data: {HEAD},"choices":[{json.dumps(choice, separators=(",", ":"))}]}}\n\n'.encode()


def _frames(error_after: int | None) -> list[bytes]:
    frames = [_chunk({"role": "assistant", "content": ""})]
    for i, token in enumerate(TOKENS):
        if i == error_after:
            # vLLM's create_streaming_error_response: json.dumps of ErrorResponse.model_dump()
            err = {"message": "engine died", "type": "InternalServerError", "param": None, "code": 500}
            return [*frames, f"data: {json.dumps({'error': err})}\n\n".encode(), b"data: [DONE]\n\n"]
        frames.append(_chunk({"content": token}, "length" if i == len(TOKENS) - 1 else None))
    usage = '"usage":{"prompt_tokens":7,"total_tokens":19,"completion_tokens":12}'
    return [*frames, f'data: {HEAD},"choices":[],{usage}}}\n\n'.encode(), b"data: [DONE]\n\n"]


async def _serve(error_after: int | None) -> tuple[web.AppRunner, str]:
    async def stream(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for frame in _frames(error_after):
            await asyncio.sleep(0.02)  # a slow engine: each frame in a read of its own
            await resp.write(frame)
        return resp

    async def health(_request: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.router.add_post(CHAT, stream)
    app.router.add_get("/health", health)  # the gateway's health check keeps the upstream in
    return await serve_app(app)


async def test_a_token_that_reads_error_is_content_not_an_error_frame() -> None:
    runner, url = await _serve(error_after=None)
    try:
        async with (
            gateway_server({"slow": [url]}) as g,
            aiohttp.ClientSession() as s,
            s.post(g.url + CHAT, json=chat_body(12)) as r,
        ):
            events = await read_events(r)
    finally:
        await runner.cleanup()
    assert b'"content":"error"' in events[3][1] and events[-1][1] == b"data: [DONE]"
    rec = g.records[-1]
    assert (rec.status, rec.error, rec.error_message) == (200, None, None)
    assert rec.output_tokens == 12 and rec.tokens_from_usage and len(rec.itl_s) == 11


async def test_a_vllm_error_frame_mid_stream_is_a_stream_error() -> None:
    runner, url = await _serve(error_after=4)
    try:
        async with (
            gateway_server({"slow": [url]}) as g,
            aiohttp.ClientSession() as s,
            s.post(g.url + CHAT, json=chat_body(12)) as r,
        ):
            await read_events(r)
    finally:
        await runner.cleanup()
    rec = g.records[-1]
    assert rec.error is ErrorKind.STREAM_ERROR and rec.error_message == "engine died"
