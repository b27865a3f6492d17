"""The evidence contract's test rig: an upstream that times each answer from its body's end, a client
that holds its body, and the collector (guard on) that the gateway, a real Envoy and the prober feed.

The upstream answers like vLLM: a streamed answer's head at once after the body, then its role and
first content chunk together `first_s` later; a non-streamed answer whole, `whole_s` after the body.
It notes for each request (by the body's `user`, else `x-request-id`) when the body ended and when
the first token went out, so a test knows the true wait from the body's end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from lanewatch.collector.collect.serve import serve
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.record.timing import RequestTiming
from tests.servers import free_port, serve_app, token_file

__all__ = ["Collector", "ContractUpstream", "Served", "collector", "contract_upstream", "held", "send_held"]


@dataclass
class Served:
    """What the upstream did with one request (time.monotonic())."""

    body_end: float
    first_token: float | None = None  # None: a non-streamed answer

    @property
    def first_token_s(self) -> float | None:
        """The true wait from the body's end to the first token."""
        return None if self.first_token is None else self.first_token - self.body_end


@dataclass
class ContractUpstream:
    """The upstream's timing and what it served, by request name."""

    first_s: float = 0.1
    whole_s: float = 0.75
    served: dict[str, Served] = field(default_factory=dict)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body_end = time.monotonic()
        body = json.loads(raw)
        name = str(body.get("user") or request.headers.get("x-request-id") or len(self.served))
        served = self.served[name] = Served(body_end)
        model = body.get("model", "m")
        if not body.get("stream"):
            await asyncio.sleep(self.whole_s)
            message = {"role": "assistant", "content": "t0 t1 t2"}
            usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
            choice = {"index": 0, "message": message, "finish_reason": "length"}
            answer = {
                "id": "c",
                "object": "chat.completion",
                "model": model,
                "choices": [choice],
                "usage": usage,
            }
            return web.json_response(answer)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)  # vLLM sends a stream's head before it queues or prefills
        await asyncio.sleep(self.first_s)
        await resp.write(
            _event(model, {"role": "assistant", "content": ""}) + _event(model, {"content": "t0 "})
        )
        served.first_token = time.monotonic()
        for i in (1, 2):
            await asyncio.sleep(0.01)
            await resp.write(_event(model, {"content": f"t{i} "}))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


async def _models(_: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})


async def _health(_: web.Request) -> web.Response:
    return web.Response()


def _event(model: str, delta: dict[str, str]) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": None}
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": model, "choices": [choice]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


@asynccontextmanager
async def contract_upstream(**kw: Any) -> AsyncIterator[tuple[ContractUpstream, str]]:
    """The upstream, served on 127.0.0.1 until the block ends: (it, its URL)."""
    up = ContractUpstream(**kw)
    app = web.Application()
    app.router.add_post("/v1/chat/completions", up.chat)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    runner, url = await serve_app(app)
    try:
        yield up, url
    finally:
        await runner.cleanup()


def send_held(url: str, body: dict[str, Any], hold_s: float, headers: dict[str, str] | None = None) -> float:
    """POST `body` to `url`/v1/chat/completions over a raw socket, holding its second half back
    `hold_s`, and read the answer whole; the upload's length as sent (first to last body byte)."""
    host, port = url.removeprefix("http://").split(":")
    raw = json.dumps(body).encode()
    lines = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"{lines}content-length: {len(raw)}\r\nconnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        half = len(raw) // 2
        sock.sendall(head + raw[:half])
        began = time.monotonic()
        time.sleep(hold_s)
        sock.sendall(raw[half:])
        upload_s = time.monotonic() - began
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    return upload_s


async def held(url: str, body: dict[str, Any], hold_s: float, headers: dict[str, str] | None = None) -> float:
    """`send_held` on a thread of its own: the loop's default executor also resolves the gateway's and
    the collector's upstream names, and a few held clients would take every one of its threads."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return await asyncio.get_running_loop().run_in_executor(pool, send_held, url, body, hold_s, headers)


@dataclass
class Collector:
    """A running collector with the guard on: what it took, as the guard took it."""

    svc: CollectorService
    url: str
    token: str
    token_path: Path
    events: list[tuple[str, Progress]] = field(default_factory=list)  # (reporter, event), as judged
    records: list[RequestTiming] = field(default_factory=list)

    @property
    def port(self) -> int:
        """Its HTTP port: Envoy sends its access log there over OTLP/HTTP."""
        return int(self.url.rsplit(":", 1)[1])

    def missed(self, lane: str = "fast") -> int:
        """The guard's missed verdicts on `lane` so far."""
        assert self.svc.guard is not None
        return self.svc.guard.verdicts[(lane, "missed")]

    def reported(self, prefix: str) -> list[Progress]:
        """The events of the reporters whose id starts with `prefix`."""
        return [e for reporter, e in self.events if reporter.startswith(prefix)]


@asynccontextmanager
async def collector(tmp_path: Path) -> AsyncIterator[Collector]:
    """A collector on 127.0.0.1 (guard on, the bundled SLO spec: the fast lane's TTFT SLO is 0.5 s,
    an ingest token, OTLP on), each progress event and record kept."""
    port = free_port()
    token_path, token = token_file(tmp_path)
    cfg = LanewatchConfig(
        ingest={"token_file": token_path},
        scrape={"enabled": False},
        gpu={"enabled": False},
        probe={"enabled": False},
        otlp={"enabled": True, "join_wait_s": 0.0},
        server={"port": port},
        guard={"enabled": True, "alertmanager_urls": ["http://127.0.0.1:9"]},
    )
    svc = CollectorService.from_config(cfg, source_factory=None)
    guard = svc.guard
    assert guard is not None
    got = Collector(svc, f"http://127.0.0.1:{port}", token, token_path)
    judge = guard.progress

    def progress(reporter: str, events: Any) -> None:
        events = list(events)
        got.events.extend((reporter, e) for e in events)
        judge(reporter, events)

    guard.progress = progress  # type: ignore[method-assign]
    svc.add_listener(got.records.append)
    stop, listening = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(svc, "127.0.0.1", port, stop, lambda _: listening.set()))
    await asyncio.wait_for(listening.wait(), 10)
    try:
        yield got
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
