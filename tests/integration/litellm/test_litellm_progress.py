"""A real LiteLLM proxy with lanewatch's handler holds to the fast guard's evidence contract
(tests/evidence_contract.py, docs/slo.md): its records and its progress reports.

Behind the proxy, an upstream of the test's own sends each answer's first content token
FIRST_S after it took the request (a role chunk at once, then three short content chunks); the
collector is a stand-in that keeps every record batch and progress report it is sent, and
checks the handler's bearer token on both. Requests, one after another: streamed and not, each
with its body sent at once and dribbled over UPLOAD_S, and a streamed text completion (after a
first request that warms LiteLLM's imports, left out). Each
streamed request must be reported while it waits (ages that never hold the upload) and by one
first-token event; a non-streamed one must yield no event and a record with no TTFT; no record
holds the upload.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.progress.wire import parse_progress
from lanewatch.collector.record.batch import parse_batch
from lanewatch.collector.record.timing import RequestTiming
from tests.evidence_contract import check_evidence, check_progress
from tests.litellm import litellm_python, start_proxy
from tests.servers import serve_app
from tests.waiting import eventually_async

pytestmark = pytest.mark.integration

TOKEN = "litellm-progress-token"
FIRST_S = 0.6  # the upstream's first content token, after it took the request
UPLOAD_S = 1.5  # a dribbled body's first byte to its last
LEAVE_S = 0.15  # a client that leaves before its first token
TOLERANCE_S = 0.4  # the proxy's hops between the body's end and the upstream (tens of ms unloaded)


@dataclass
class Collector:
    """What the stand-in collector was sent."""

    records: list[RequestTiming] = field(default_factory=list)
    events: list[Progress] = field(default_factory=list)
    reporters: set[str] = field(default_factory=set)
    unauthorized: int = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/records", self.take_records)
        app.router.add_post("/v1/progress", self.take_progress)
        return app

    def _authorized(self, request: web.Request) -> bool:
        ok = request.headers.get("Authorization") == f"Bearer {TOKEN}"
        self.unauthorized += not ok
        return ok

    async def take_records(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({}, status=401)
        batch = parse_batch(await request.read(), received_at=time.time())
        self.records.extend(batch.records)
        return web.json_response({"accepted": len(batch.records), "refused_count": len(batch.refused)})

    async def take_progress(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({}, status=401)
        report = parse_progress(await request.read())
        self.reporters.add(report.reporter)
        self.events.extend(report.events)
        return web.json_response({"accepted": len(report.events)})


def _chunk(kind: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    if kind == "chat":
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        obj = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
    else:
        choice = {"index": 0, "text": delta.get("content") or "", "logprobs": None, "finish_reason": finish}
        obj = {"id": "c", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def upstream(request: web.Request) -> web.StreamResponse:
    """An OpenAI-compatible answer whose first content token comes FIRST_S after the request."""
    took = time.monotonic()
    body = await request.json()
    kind = "chat" if request.path.endswith("/chat/completions") else "text"
    usage = {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    if not body.get("stream"):
        await asyncio.sleep(FIRST_S)
        message = {"role": "assistant", "content": "a b c"}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        if kind == "text":
            choice = {"index": 0, "text": "a b c", "logprobs": None, "finish_reason": "stop"}
        obj = "chat.completion" if kind == "chat" else "text_completion"
        return web.json_response(
            {"id": "c", "object": obj, "created": 1, "model": "m", "choices": [choice], "usage": usage}
        )
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(_chunk(kind, {"role": "assistant", "content": ""}))
    await asyncio.sleep(max(0.0, took + FIRST_S - time.monotonic()))
    for word in ("a", " b", " c"):
        await resp.write(_chunk(kind, {"content": word}))
        await asyncio.sleep(0.02)
    await resp.write(_chunk(kind, {}, "stop"))
    last = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [],
        "usage": usage,
    }
    await resp.write(b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n")
    return resp


@dataclass(frozen=True)
class Sent:
    """One request as the client sent it: whether streamed, its upload's seconds, LiteLLM's call id."""

    streamed: bool
    upload_s: float
    call_id: str


async def send(client: httpx.AsyncClient, path: str, body: dict[str, Any], dribble: bool) -> Sent:
    """Send one request (its body in two writes UPLOAD_S apart when `dribble`) and read its answer."""
    raw = json.dumps(body).encode()
    marks: list[float] = []

    async def parts() -> AsyncIterator[bytes]:
        marks.append(time.monotonic())
        yield raw[:10]
        await asyncio.sleep(UPLOAD_S)
        marks.append(time.monotonic())
        yield raw[10:]

    content: Any = parts() if dribble else raw
    headers = {"Content-Type": "application/json"}
    async with client.stream("POST", path, content=content, headers=headers) as r:
        answer = await r.aread()
        assert r.status_code == 200, answer
        call_id = r.headers["x-litellm-call-id"]
    upload = marks[-1] - marks[0] if marks else 0.0
    return Sent(bool(body.get("stream")), upload, call_id)


def chat(stream: bool) -> dict[str, Any]:
    return {
        "model": "fast",
        "max_tokens": 3,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    }


async def test_records_and_progress_hold_to_the_evidence_contract(tmp_path: Path) -> None:
    litellm_python()
    collector = Collector()
    sink, collector_url = await serve_app(collector.app())
    model = web.Application()
    model.router.add_post("/v1/chat/completions", upstream)
    model.router.add_post("/v1/completions", upstream)
    upstream_runner, upstream_url = await serve_app(model)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    settings = {
        "collector_url": collector_url,
        "token_file": str(token_file),
        "lanes": {"fast": "fast"},
        "interval_s": 0.2,
        "progress_interval_s": 0.1,
    }
    try:
        with start_proxy(tmp_path / "litellm", {"fast": (upstream_url, "m")}, settings) as proxy:
            async with httpx.AsyncClient(base_url=proxy.url, timeout=60) as client:
                await send(
                    client, "/v1/chat/completions", chat(True), dribble=False
                )  # LiteLLM's imports: seconds
                await asyncio.sleep(0.3)  # its last report
                skip = len(collector.events)
                sent = []
                for stream, dribble in ((True, False), (True, True), (False, False), (False, True)):
                    sent.append(await send(client, "/v1/chat/completions", chat(stream), dribble))
                text = {"model": "fast", "max_tokens": 3, "stream": True, "prompt": "hi"}
                sent.append(await send(client, "/v1/completions", text, dribble=False))
                # A client that leaves before its first token: the proxy's stream closes, so does its flight.
                async with client.stream("POST", "/v1/chat/completions", json=chat(True)) as r:
                    assert r.status_code == 200
                    await asyncio.sleep(LEAVE_S)
                await asyncio.sleep(FIRST_S + 1.0)  # past when its first token would have come
            await eventually_async(
                lambda: len(collector.records) >= len(sent), 30, f"{len(sent)} records ({proxy.log_path})"
            )
            await asyncio.sleep(0.5)  # the last reports
    finally:
        await upstream_runner.cleanup()
        await sink.cleanup()
    assert collector.unauthorized == 0
    assert len(collector.reporters) == 1 and next(iter(collector.reporters)).startswith("litellm-")
    warm_up = {e.id for e in collector.events[:skip]}
    by_id: dict[int, list[Progress]] = {}
    for event in collector.events[skip:]:
        assert event.id not in warm_up, event
        by_id.setdefault(event.id, []).append(event)
    left = by_id.pop(max(by_id))  # the client that left: never judged past its leaving
    assert left and max(e.age_s for e in left) < LEAVE_S + TOLERANCE_S, left
    assert not any(e.first_token for e in left), left
    streamed = [s for s in sent if s.streamed]
    # Only streamed requests enter the table, in the order they came: its ids are theirs.
    assert len(by_id) == len(streamed), {k: len(v) for k, v in by_id.items()}
    events_of = dict(zip((s.call_id for s in streamed), (by_id[k] for k in sorted(by_id)), strict=True))
    records = {r.request_id: r for r in collector.records}
    breaches = []
    for s in sent:
        record = records[s.call_id]
        assert (record.source, record.lane, record.status) == ("litellm", "fast", 200)
        first = FIRST_S if s.streamed else None
        events = events_of.get(s.call_id, [])
        up, tol = s.upload_s, TOLERANCE_S
        breaches += check_evidence(
            record, streamed=s.streamed, upload_s=up, upstream_first_token_s=first, tolerance_s=tol
        )
        breaches += check_progress(
            events, streamed=s.streamed, upload_s=up, upstream_first_token_s=first, tolerance_s=tol
        )
        if s.streamed:  # reported while it waited, and its first token once
            assert sum(e.first_token for e in events) == 1 and not events[0].first_token, events
        print(
            f"streamed={s.streamed} upload={s.upload_s:.2f}s ttft={record.ttft_s} e2e={record.e2e_s:.3f}"
            f" events={[(round(e.age_s, 3), e.first_token) for e in events]}"
        )
    assert any(s.upload_s >= UPLOAD_S for s in sent if s.streamed)
    assert breaches == [], breaches
