"""One generation request from arrival to ground truth: admission, faults, streaming, records.

The streaming response is a raw ASGI response so that each SSE frame goes to the socket the
moment its token exists (one `send` per frame, no buffering), and so that the first content
frame's time is taken right after uvicorn has handed it to the transport: that is `ttft_s`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from . import protocol, tokens
from .engine import EngineRequest, RequestTimes
from .faults import StreamFaults
from .metrics import FinishedRequest, VllmMetrics
from .profiles import Profile
from .runner import EngineRunner, Token
from .tracing import SpanData, SpanSink, incoming_trace_id
from .truth import TruthRecord, TruthStore

SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]


class StreamTruncated(Exception):
    """Raised to make uvicorn drop the connection mid-stream (the truncation fault)."""


@dataclass
class Recorder:
    """Where finished requests go: ground truth, vLLM metrics, spans."""

    truth: TruthStore
    metrics: VllmMetrics
    spans: SpanSink | None
    profile: Profile
    per_request_metrics: bool = False  # as vllm serve --enable-per-request-metrics
    prompt_tokens_details: bool = False  # as vllm serve --enable-prompt-tokens-details


@dataclass
class Generation:
    """A validated request in flight and what it has measured so far."""

    params: protocol.GenParams
    plan: tokens.OutputPlan
    request_id: str
    engine_id: str  # unique even when clients reuse an x-request-id
    arrival_s: float  # perf clock
    arrival_time: float  # unix
    trace_headers: dict[str, str]
    faults: StreamFaults
    created: int = field(default_factory=lambda: int(time.time()))
    ttft_s: float | None = None
    written: int = 0  # output tokens written
    chunks: int = 0  # content chunks written (one per engine step; the faults count these)
    times: RequestTimes | None = None
    reason: str = "abort"

    @property
    def response_id(self) -> str:
        """The response's `id`, vLLM style."""
        return ("chatcmpl-" if self.params.api == "chat" else "cmpl-") + self.request_id


def trace_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The W3C trace context headers of a request."""
    return {k: headers[k] for k in ("traceparent", "tracestate") if k in headers}


class GenerationResponse(Response):
    """Runs a generation through the engine and writes it, streamed or whole."""

    def __init__(
        self,
        gen: Generation,
        runner: EngineRunner,
        recorder: Recorder,
        queue_delay_s: float,
        frontend_delay_s: float = 0.0,
    ) -> None:
        self.gen = gen
        self.runner = runner
        self.recorder = recorder
        self.queue_delay_s = queue_delay_s
        self.frontend_delay_s = frontend_delay_s  # the fault's, on top of the profile's front end
        self.background = None
        self.status_code = 200

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gen = self.gen
        gone = asyncio.Event()
        watcher = asyncio.create_task(self._watch(receive, gone))
        try:
            await self._run(send, gone)
        except StreamTruncated:
            gen.reason = "abort"
            raise
        finally:
            watcher.cancel()
            self.runner.abort(gen.engine_id)
            self._record(time.perf_counter())

    async def _watch(self, receive: Receive, gone: asyncio.Event) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        self.runner.abort(self.gen.engine_id)

    async def _run(self, send: Send, gone: asyncio.Event) -> None:
        gen, profile = self.gen, self.recorder.profile
        await asyncio.sleep(profile.frontend_delay_s(gen.params.prompt_tokens) + self.frontend_delay_s)
        queued = time.perf_counter()
        if gen.params.stream:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        if self.queue_delay_s:
            await asyncio.sleep(self.queue_delay_s)
        if gone.is_set():
            return
        req = EngineRequest(gen.engine_id, gen.params.prompt_ids, gen.plan.tokens, queued)
        queue = self.runner.submit(req)
        if gen.params.stream:
            await self._stream(queue, send)
        else:
            await self._whole(queue, send)

    async def _stream(self, queue: asyncio.Queue[Token], send: Send) -> None:
        gen, p, f = self.gen, self.gen.params, self.gen.faults
        w = protocol.ChunkWriter(p.api, gen.response_id, p.model, gen.created, p.prompt_tokens)
        prev_at: float | None = None
        while True:
            tok = await queue.get()
            if tok.index < 0:
                return
            if prev_at is not None:
                self.recorder.metrics.on_token_gap(tok.at_s - prev_at)
            prev_at = tok.at_s
            if gen.chunks == 0 and p.api == "chat":
                await send({"type": "http.response.body", "body": w.role(), "more_body": True})
            if gen.chunks == f.stall_after:
                await asyncio.sleep(f.stall_s)
            if gen.chunks == f.truncate_after:
                raise StreamTruncated(gen.request_id)
            if gen.chunks == f.malformed_after:
                await send({"type": "http.response.body", "body": w.malformed(), "more_body": True})
            last = tok.times is not None
            # a step's tokens go out as one chunk, as vLLM streams a step's output
            text = "".join(tokens.output_token(p.digest, i) for i in range(tok.index, tok.index + tok.count))
            frame = w.token(
                text,
                gen.plan.finish_reason if last else None,
                tok.index + tok.count if p.continuous_usage else None,
            )
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            gen.written += tok.count
            gen.chunks += 1
            if gen.ttft_s is None:
                gen.ttft_s = time.perf_counter() - gen.arrival_s
            if tok.times is not None:
                gen.times = tok.times
                break
        usage = w.usage(gen.written, self._metrics(), self._cached_tokens()) if p.include_usage else b""
        tail = usage + protocol.DONE_FRAME
        await send({"type": "http.response.body", "body": tail, "more_body": False})
        gen.reason = gen.plan.finish_reason

    async def _whole(self, queue: asyncio.Queue[Token], send: Send) -> None:
        gen = self.gen
        first_at: float | None = None
        while True:
            tok = await queue.get()
            if tok.index < 0:
                return
            first_at = first_at or tok.at_s
            gen.written += tok.count
            if tok.times is not None:
                gen.times = tok.times
                break
        gen.ttft_s = (first_at or gen.arrival_s) - gen.arrival_s
        text = tokens.output_text(gen.params.digest, gen.written)
        body = protocol.full_response(
            gen.params,
            gen.response_id,
            gen.created,
            text,
            gen.plan.finish_reason,
            gen.written,
            self._metrics(),
            self._cached_tokens(),
        )
        raw = json.dumps(body, separators=(",", ":")).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": raw, "more_body": False})
        gen.reason = gen.plan.finish_reason

    def _cached_tokens(self) -> int | None:
        """The prompt tokens the prefix cache served, when the option is on and there were any.

        vLLM writes `prompt_tokens_details` only with --enable-prompt-tokens-details and a non-zero
        count (`if self.enable_prompt_tokens_details and num_cached_tokens`): no key for zero.
        """
        t = self.gen.times
        if not self.recorder.prompt_tokens_details or t is None or not t.cached_tokens:
            return None
        return t.cached_tokens

    def _metrics(self) -> dict[str, float] | None:
        """The per-request metrics object, when the option is on and the engine timed the request."""
        t = self.gen.times
        if not self.recorder.per_request_metrics or t is None:
            return None
        return protocol.per_request_metrics(
            t.queued_s, t.scheduled_s, t.first_token_s, t.last_token_s, self.gen.written
        )

    def _record(self, end_s: float) -> None:
        gen, rec = self.gen, self.recorder
        t = gen.times
        queue_s = prefill_s = decode_s = 0.0
        if t is not None:
            queue_s, prefill_s, decode_s = (
                t.scheduled_s - t.queued_s,
                t.first_token_s - t.scheduled_s,
                t.last_token_s - t.first_token_s,
            )
        e2e = end_s - gen.arrival_s
        ttft = gen.ttft_s if gen.ttft_s is not None else 0.0
        finished = FinishedRequest(
            finished_reason=gen.reason,
            ttft_s=ttft,
            e2e_s=e2e,
            queue_s=queue_s,
            prefill_s=prefill_s,
            decode_s=decode_s,
            prompt_tokens=gen.params.prompt_tokens,
            output_tokens=gen.written if gen.ttft_s is not None else 0,
            max_tokens=gen.params.max_tokens,
            preemptions=t.preemptions if t else 0,
        )
        rec.metrics.on_finish(finished, t.cached_tokens if t else 0)
        trace_id = incoming_trace_id(gen.trace_headers)
        if rec.spans is not None:
            trace_id = rec.spans.emit(
                SpanData(
                    request_id=gen.response_id,
                    arrival_time=gen.arrival_time,
                    ttft_s=ttft,
                    e2e_s=e2e,
                    queue_s=queue_s,
                    prefill_s=prefill_s,
                    decode_s=decode_s,
                    prompt_tokens=gen.params.prompt_tokens,
                    output_tokens=gen.written,
                    max_tokens=gen.params.max_tokens_param,
                    temperature=gen.params.temperature,
                    top_p=gen.params.top_p,
                ),
                gen.trace_headers,
            )
        rec.truth.add(
            TruthRecord(
                request_id=gen.request_id,
                trace_id=trace_id,
                arrival_time=gen.arrival_time,
                queue_s=queue_s,
                prefill_s=prefill_s,
                ttft_s=ttft,
                decode_s=decode_s,
                e2e_s=e2e,
                prompt_tokens=gen.params.prompt_tokens,
                output_tokens=gen.written,
                finished_reason=gen.reason,
                http_status=200,
                cached_tokens=t.cached_tokens if t else 0,
                preemptions=t.preemptions if t else 0,
            )
        )


def error_record(
    request_id: str, arrival_s: float, arrival_time: float, status: int, headers: Any
) -> TruthRecord:
    """Ground truth for a request answered with an error before it reached the engine."""
    return TruthRecord(
        request_id=request_id,
        trace_id=incoming_trace_id(headers),
        arrival_time=arrival_time,
        queue_s=0.0,
        prefill_s=0.0,
        ttft_s=0.0,
        decode_s=0.0,
        e2e_s=time.perf_counter() - arrival_s,
        prompt_tokens=0,
        output_tokens=0,
        finished_reason="error",
        http_status=status,
    )
