"""A small OpenAI-style SSE upstream with exact, known chunk timing, for gateway tests and benches.

Per request (headers override the server's defaults): `x-test-first-ms` (first content
chunk after the request), `x-test-gap-ms` (between content chunks), `max_tokens` in the
body (content chunks sent), `x-test-status` (answer this status with an OpenAI error),
`x-test-truncate` (end without [DONE]), `x-test-abort` (drop the connection
mid-stream). It records each request's body and headers, the monotonic time each
content chunk was written (GET /debug/requests/{id}), and whether the client went away.

Run alone: `python -m tests.sse_upstream --port 8001 [--first-ms 50 --gap-ms 10]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["SseUpstream", "UpstreamLog"]


@dataclass
class UpstreamLog:
    """What the upstream saw of one request."""

    body: dict[str, Any]
    headers: dict[str, str]
    raw: bytes = b""  # the body's bytes as they arrived
    writes: list[float] = field(default_factory=list)  # time.monotonic() after each content chunk
    cancelled: bool = False
    finished: bool = False
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # set when the handler is done


class SseUpstream:
    """The test upstream: an aiohttp app and the log of what it served."""

    def __init__(self, first_ms: float = 20.0, gap_ms: float = 10.0, model: str = "test-model") -> None:
        self.first_ms = first_ms
        self.gap_ms = gap_ms
        self.model = model
        self.requests: dict[str, UpstreamLog] = {}
        self.healthy = True
        self.app = web.Application(client_max_size=64 * 1024 * 1024)  # bodies as large as vLLM takes
        self.app.router.add_post("/v1/chat/completions", self._chat)
        self.app.router.add_post("/v1/completions", self._completions)
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/debug/requests/{rid}", self._debug)

    def last(self) -> UpstreamLog:
        """The most recent request's log."""
        return list(self.requests.values())[-1]

    async def _health(self, _r: web.Request) -> web.Response:
        return web.Response(status=200 if self.healthy else 503)

    async def _models(self, _r: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def _debug(self, request: web.Request) -> web.Response:
        log = self.requests.get(request.match_info["rid"])
        if log is None:
            return web.json_response({"error": "unknown"}, status=404)
        return web.json_response({"writes": log.writes, "cancelled": log.cancelled, "finished": log.finished})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False)

    async def _serve(self, request: web.Request, chat: bool) -> web.StreamResponse:
        t_start = time.monotonic()
        raw = await request.read()
        body = json.loads(raw)  # from bytes, as vLLM's server reads it: a UTF-8 BOM is read past
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex
        log = self.requests[rid] = UpstreamLog(body=body, headers=dict(request.headers), raw=raw)
        status = int(request.headers.get("x-test-status", "200"))
        if status != 200:
            err = {
                "error": {"message": "injected", "type": "InternalServerError", "param": None, "code": status}
            }
            return web.json_response(err, status=status, headers={"x-request-id": rid})
        n = int(body.get("max_tokens") or 8)
        first = float(request.headers.get("x-test-first-ms", self.first_ms)) / 1000
        gap = float(request.headers.get("x-test-gap-ms", self.gap_ms)) / 1000
        if not body.get("stream"):
            await asyncio.sleep(first + gap * (n - 1))
            return web.json_response(_full(chat, self.model, n), headers={"x-request-id": rid})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "x-request-id": rid})
        try:
            await resp.prepare(request)
            if chat:
                await resp.write(_event(_chunk(chat, self.model, {"role": "assistant", "content": ""})))
            deadline = t_start + first
            for i in range(n):
                await _sleep_until(deadline)
                await resp.write(_event(_chunk(chat, self.model, _delta(chat, f"t{i} "))))
                log.writes.append(time.monotonic())
                deadline = log.writes[-1] + gap  # never closer than `gap`, even after a late write
            if request.headers.get("x-test-truncate"):
                return resp
            if request.headers.get("x-test-abort") and request.transport is not None:
                request.transport.abort()  # the connection breaks mid-stream
                return resp
            opts = body.get("stream_options") or {}
            if opts.get("include_usage"):
                usage = {"prompt_tokens": 7, "total_tokens": 7 + n, "completion_tokens": n}
                await resp.write(
                    _event({"id": "x", "object": "chat.completion.chunk", "choices": [], "usage": usage})
                )
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            log.finished = True
        except (asyncio.CancelledError, ConnectionResetError):
            log.cancelled = True
            raise
        finally:
            log.ended.set()
        return resp


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


def _delta(chat: bool, text: str) -> dict[str, Any]:
    return {"content": text} if chat else {"text": text}


def _chunk(chat: bool, model: str, delta: dict[str, Any]) -> dict[str, Any]:
    if chat:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        return {
            "id": "chatcmpl-x",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [choice],
        }
    choice = {"index": 0, "text": delta["text"], "logprobs": None, "finish_reason": None}
    return {"id": "cmpl-x", "object": "text_completion", "created": 0, "model": model, "choices": [choice]}


def _full(chat: bool, model: str, n: int) -> dict[str, Any]:
    text = "".join(f"t{i} " for i in range(n))
    usage = {"prompt_tokens": 7, "total_tokens": 7 + n, "completion_tokens": n}
    if chat:
        msg = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": msg, "finish_reason": "length"}
        return {
            "id": "chatcmpl-x",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [choice],
            "usage": usage,
        }
    return {
        "id": "cmpl-x",
        "object": "text_completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
        "usage": usage,
    }


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def main() -> None:
    """Serve the test upstream on a port until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--first-ms", type=float, default=20.0)
    parser.add_argument("--gap-ms", type=float, default=10.0)
    args = parser.parse_args()
    up = SseUpstream(first_ms=args.first_ms, gap_ms=args.gap_ms)
    web.run_app(
        up.app, host=args.host, port=args.port, print=None, access_log=None, handler_cancellation=True
    )


if __name__ == "__main__":
    main()
