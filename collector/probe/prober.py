"""The active prober: one streamed completion, measured phase by phase into a RequestTiming.

Phases come from httpcore's `trace` events (TLS, send, response headers) and from
`TimedBackend` (DNS and TCP connect apart). The first content chunk and every gap after
it are timed here, right after each raw read returns, before any parsing. Every failure
maps to one `ErrorKind`; `probe()` never raises for a failed request. Prompt and response
text reach the record and span only with `record_content` (export.record_content).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from itertools import pairwise
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import httpcore
from opentelemetry.trace import Tracer

from lanewatch.collector.common.error_detail import error_detail
from lanewatch.collector.common.headers import AUTHORIZATION, DEGRADED_HEADER, LANE_HEADER, REQUEST_ID
from lanewatch.collector.common.response_metrics import ResponseMetrics, with_response_metrics
from lanewatch.collector.common.secrets import read_secret_or_none
from lanewatch.collector.common.sse import ChunkKind, SseParser, StreamChunk, Usage
from lanewatch.collector.config import RequestClass, Target, Timeouts
from lanewatch.collector.probe.errors import failure_kind
from lanewatch.collector.probe.prompts import prompt_text
from lanewatch.collector.probe.spans import finish_probe_span, start_probe_span, trace_headers
from lanewatch.collector.probe.transport import ConnectTimes, build_pool, capture_connect_times, ssl_context
from lanewatch.collector.record.content import StreamedText, truncate
from lanewatch.collector.record.timing import Api, ErrorKind, RequestTiming, error_kind_for_status

log = logging.getLogger(__name__)

PATHS: dict[Api, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
SSE_BAD_EVENTS_ATTR = "sse_bad_events"  # record attr: undecodable SSE events in the stream
_ERROR_BODY_LIMIT = 64 * 1024
_ERROR_HEAD = 8 * 1024  # bytes of an error body kept to find the server's message in
_AFTER_DONE_S = 1.0  # how long to wait for the body's end after `data: [DONE]`
_USER_AGENT = "lanewatch-probe"
_KEPT_HEADERS = (b"x-request-id", b"x-lanewatch-lane", b"x-lanewatch-degraded", b"content-type")


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    """What one probe sends; the prompt is recorded only with record_content."""

    request_class: str
    api: Api
    max_tokens: int
    ignore_eos: bool = True
    prompt: str = field(default="Say hello.", repr=False)

    def body(self, model: str) -> bytes:
        """The JSON request body, streamed with usage."""
        req: dict[str, Any] = {"model": model, "max_tokens": self.max_tokens, "stream": True}
        req["stream_options"] = {"include_usage": True}
        if self.ignore_eos:
            req["ignore_eos"] = True  # vLLM extension: generate exactly max_tokens
        if self.api == "chat":
            req["messages"] = [{"role": "user", "content": self.prompt}]
        else:
            req["prompt"] = self.prompt
        return json.dumps(req).encode("utf-8")


def spec_for(request_class: RequestClass, target: Target, seq: int = 0) -> ProbeSpec:
    """The probe for a class on a target: the class's api when it names one, else the target's."""
    api: Api = request_class.api if "api" in request_class.model_fields_set else target.api
    return ProbeSpec(
        request_class.name,
        api,
        request_class.max_tokens,
        request_class.ignore_eos,
        prompt_text(request_class, seq),
    )


class _Run:
    """Mutable state of one probe; perf_counter timestamps."""

    def __init__(self, t0: float, t0_ns: int, text: StreamedText | None = None) -> None:
        self.t0 = t0  # perf_counter when the request started
        self.t0_ns = t0_ns  # the same instant, wall clock (for span times)
        self.conn = ConnectTimes()
        self.phase = "pool"  # pool, connect, tls, send, wait, body
        self.connect_at: float | None = None
        self.tls_at: float | None = None
        self.tls_end: float | None = None
        self.send_at: float | None = None
        self.send_end: float | None = None
        self.headers_at: float | None = None
        self.content: list[float] = []  # read time of each content chunk
        self.done_at: float | None = None
        self.end: float | None = None
        self.status: int | None = None
        self.request_id: str | None = None
        self.usage: Usage | None = None
        self.error: ErrorKind | None = None
        self.error_message: str | None = None  # the server's reason, cleaned
        self.metrics: ResponseMetrics | None = None  # vLLM's per-request metrics, when sent
        self.bad_events = 0
        self.attrs: dict[str, str] = {}
        self.text = text  # the response text, kept only with record_content

    async def on_trace(self, name: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if name == "connection.connect_tcp.started":
            self.connect_at, self.phase = now, "connect"
        elif name == "connection.start_tls.started":
            self.tls_at, self.phase = now, "tls"
        elif name == "connection.start_tls.complete":
            self.tls_end = now
        elif name == "http11.send_request_headers.started":
            self.send_at, self.phase = now, "send"
        elif name == "http11.send_request_body.complete":
            self.send_end, self.phase = now, "wait"
        elif name == "http11.receive_response_headers.complete":
            self.headers_at, self.phase = now, "body"

    def offset(self, t: float | None) -> float | None:
        return None if t is None else t - self.t0

    def intervals(self) -> dict[str, tuple[float, float]]:
        """Phase spans as (start, end) offsets, for the trace."""
        out: dict[str, tuple[float, float]] = {}
        if self.connect_at is not None:
            c = self.connect_at - self.t0
            out["dns"] = (c, c + self.conn.dns_s)
            out["connect"] = (c + self.conn.dns_s, c + self.conn.dns_s + self.conn.connect_s)
        if self.tls_at is not None and self.tls_end is not None:
            out["tls"] = (self.tls_at - self.t0, self.tls_end - self.t0)
        if self.send_at is not None and self.send_end is not None:
            out["send"] = (self.send_at - self.t0, self.send_end - self.t0)
            if self.content:
                out["server_wait"] = (self.send_end - self.t0, self.content[0] - self.t0)
        if self.content and self.end is not None:
            out["decode"] = (self.content[0] - self.t0, self.end - self.t0)
        return out


class Prober:
    """Probes one target; `probe()` returns a RequestTiming for every request, failed or not."""

    def __init__(
        self,
        target: Target,
        *,
        connection: Literal["warm", "cold"] = "warm",
        timeouts: Timeouts | None = None,
        tracer: Tracer | None = None,
        max_connections: int = 4,
        record_content: bool = False,
    ) -> None:
        self.target = target
        self.record_content = record_content  # prompt and response text on records and spans
        self.timeouts = timeouts or Timeouts()
        self._tracer = tracer  # None: no exporter, so no span is built (a traceparent still goes out)
        parts = urlsplit(target.url)
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._api_key = read_api_key(target)
        tls = ssl_context(target.cacert, target.insecure) if parts.scheme == "https" else None
        self._primed = False
        self._pool = build_pool(connection=connection, tls=tls, max_connections=max_connections)
        # Built once per target: the URL of each API and the Host header every request carries.
        self._urls = {api: httpcore.URL(target.url + path) for api, path in PATHS.items()}
        netloc = parts.netloc.rpartition("@")[2]
        self._fixed_headers = [(b"host", netloc.encode("idna")), (b"user-agent", _USER_AGENT.encode())]

    async def __aenter__(self) -> Prober:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close pooled connections."""
        await self._pool.aclose()

    async def probe(self, spec: ProbeSpec, timeouts: Timeouts | None = None) -> RequestTiming:
        """Send one streamed request and measure it (`timeouts` overrides the prober's)."""
        if not self._primed:
            await _prime()
            self._primed = True
        started_at, start_ns = time.time(), time.time_ns()
        tracer, span = self._tracer, None
        trace_id: str | None
        if tracer is None:
            headers, trace_id = trace_headers()
        else:
            span, headers, trace_id = start_probe_span(
                tracer,
                api=spec.api,
                model=self.target.model,
                host=self._host,
                port=self._port,
                max_tokens=spec.max_tokens,
                start_ns=start_ns,
                attributes={
                    "lanewatch.target": self.target.name,
                    "lanewatch.request_class": spec.request_class,
                },
            )
        sent_id = f"lanewatch-probe-{uuid.uuid4().hex}"
        headers.update(self._headers(sent_id))
        run = _Run(time.perf_counter(), start_ns, StreamedText() if self.record_content else None)
        try:
            await self._exchange(spec, run, headers, timeouts or self.timeouts)
        except Exception as exc:  # every failure becomes an error kind, never a crash
            run.error = failure_kind(exc, run.phase, run.conn.resolving)
            log.debug("probe of %s failed in phase %s: %s", self.target.name, run.phase, run.error)
        except BaseException:  # cancelled: no record, but no span left open either
            if span is not None:
                span.end()
            raise
        run.end = run.done_at or run.end or time.perf_counter()
        record = self._record(spec, run, started_at, trace_id, sent_id)
        if tracer is not None and span is not None:
            finish_reason = run.text.finish_reason if run.text is not None else None
            finish_probe_span(tracer, span, record, run.intervals(), run.t0_ns, finish_reason)
        return record

    def _headers(self, request_id: str) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            REQUEST_ID: request_id,
        }
        if self._api_key:
            headers[AUTHORIZATION] = f"Bearer {self._api_key}"
        if self.target.lane != "default":
            headers[LANE_HEADER] = self.target.lane
        return headers

    async def _exchange(self, spec: ProbeSpec, run: _Run, headers: dict[str, str], t: Timeouts) -> None:
        loop = asyncio.get_running_loop()
        total_at = loop.time() + t.total_s
        body = spec.body(self.target.model)
        request = httpcore.Request(
            "POST",
            self._urls[spec.api],
            headers=[
                *self._fixed_headers,
                *((k.encode(), v.encode()) for k, v in headers.items()),
                (b"content-length", str(len(body)).encode()),
            ],
            content=body,
            extensions={"trace": run.on_trace, "timeout": {"connect": t.connect_s}},
        )
        scope = asyncio.timeout_at(min(total_at, loop.time() + t.ttft_s))
        try:
            async with scope:
                with capture_connect_times(run.conn):
                    # The clock starts here: building the request is not the request's time.
                    run.t0, run.t0_ns = time.perf_counter(), time.time_ns()
                    response = await self._pool.handle_async_request(request)
                try:
                    await self._read(response, run, scope, total_at, t.stall_s)
                finally:
                    await response.aclose()
        except TimeoutError:
            if not scope.expired():
                raise
            if run.done_at is not None:
                return  # [DONE] came; the server just did not end the body: not a failure
            run.end = time.perf_counter()
            run.error = self._timeout_kind(run, scope, total_at)

    def _timeout_kind(self, run: _Run, scope: asyncio.Timeout, total_at: float) -> ErrorKind:
        if run.phase in ("pool", "connect"):
            return ErrorKind.CONNECT_TIMEOUT if not run.conn.resolving else ErrorKind.DNS
        if run.phase == "tls":
            return ErrorKind.TLS
        if not run.content:
            return ErrorKind.TTFT_TIMEOUT
        return ErrorKind.TIMEOUT if scope.when() == total_at else ErrorKind.STALL

    async def _read(
        self, response: httpcore.Response, run: _Run, scope: asyncio.Timeout, total_at: float, stall_s: float
    ) -> None:
        run.status = response.status
        kept = _headers_of(response)
        run.request_id = kept.get(REQUEST_ID)
        for name in (LANE_HEADER, DEGRADED_HEADER):
            if name in kept:
                run.attrs[name.removeprefix("x-lanewatch-")] = kept[name][:64]
        if (kind := error_kind_for_status(run.status)) is not None:
            run.error = kind
            run.error_message = error_detail(await _drain(response))
            return
        ctype = kept.get("content-type", "")
        if ctype and not ctype.startswith("text/event-stream"):
            run.error = ErrorKind.BAD_STREAM
            await _drain(response)
            return
        await self._stream(response, run, scope, total_at, stall_s)

    async def _stream(
        self, response: httpcore.Response, run: _Run, scope: asyncio.Timeout, total_at: float, stall_s: float
    ) -> None:
        loop = asyncio.get_running_loop()
        parser = SseParser(keep_text=run.text is not None)
        feed, perf, content, text = parser.feed, time.perf_counter, run.content, run.text
        stream_error = False
        async for data in response.aiter_stream():
            now = perf()  # as close to the read as we can get: before any parsing
            for chunk in feed(data):
                if run.done_at is not None:
                    continue
                kind = chunk.kind
                if kind is ChunkKind.CONTENT:
                    content.append(now)
                    scope.reschedule(min(total_at, loop.time() + stall_s))
                elif kind is ChunkKind.DONE:
                    run.done_at = now  # read on only to reuse the connection, and not for long
                    scope.reschedule(min(total_at, loop.time() + _AFTER_DONE_S))
                elif kind is ChunkKind.ERROR:
                    stream_error = True
                    run.error_message = run.error_message or chunk.message
                if chunk.usage is not None:
                    run.usage = chunk.usage
                if chunk.metrics is not None:
                    run.metrics = chunk.metrics
                if text is not None:
                    _keep_text(text, chunk)
        run.end = perf()
        parser.close()
        run.bad_events = parser.bad_events
        if parser.bad_events:  # for lanewatch_sse_bad_data_total
            run.attrs[SSE_BAD_EVENTS_ATTR] = str(parser.bad_events)
        if stream_error:
            run.error = ErrorKind.STREAM_ERROR
        elif parser.bad_events:
            run.error = ErrorKind.BAD_STREAM
        elif run.done_at is None:
            run.error = ErrorKind.TRUNCATED

    def _record(
        self, spec: ProbeSpec, run: _Run, started_at: float, trace_id: str | None, sent_id: str
    ) -> RequestTiming:
        usage = run.usage
        from_usage = usage is not None and usage.completion_tokens is not None
        tokens = usage.completion_tokens if usage is not None and from_usage else len(run.content)
        connected = run.connect_at is not None
        reused = not connected and run.send_at is not None  # no connection.* events: pooled
        if run.tls_at is not None and run.tls_end is not None:
            tls_s: float | None = run.tls_end - run.tls_at
        else:  # reused, or plain HTTP once the request went out; unknown if it failed before
            tls_s = 0.0 if run.send_at is not None else None
        record = RequestTiming(
            source="probe",
            target=self.target.name,
            lane=self.target.lane,
            request_class=spec.request_class,
            model=self.target.model,
            api=spec.api,
            started_at=started_at,
            request_id=run.request_id or sent_id,
            trace_id=trace_id,
            status=run.status,
            error=run.error,
            error_message=run.error_message if run.error is not None else None,
            dns_s=run.conn.dns_s if connected else (0.0 if reused else None),
            connect_s=run.conn.connect_s if connected and run.conn.address else (0.0 if reused else None),
            tls_s=tls_s,
            send_s=(run.send_end - run.send_at) if run.send_at and run.send_end else None,
            ttfb_s=run.offset(run.headers_at),
            ttft_s=run.offset(run.content[0]) if run.content else None,
            e2e_s=run.offset(run.end),
            itl_s=tuple(b - a for a, b in pairwise(run.content)),
            prompt_tokens=usage.prompt_tokens if usage is not None else None,
            output_tokens=tokens,
            tokens_from_usage=from_usage,
            attrs=run.attrs,
            prompt_text=truncate(spec.prompt) if self.record_content else None,
            # no response at all (it failed before one came) is no text rather than empty text
            response_text=run.text.text() if run.text is not None and run.status is not None else None,
        )
        return with_response_metrics(record, run.metrics)


def read_api_key(target: Target) -> str | None:
    """The target's API key from its file; a clear error names the field."""
    return read_secret_or_none(target.api_key_file, f"targets[{target.name}].api_key_file")


def _keep_text(text: StreamedText, chunk: StreamChunk) -> None:
    """Add a chunk's text and finish reason to the response kept for the record."""
    if chunk.text:
        text.add(chunk.text)
    if chunk.finish_reason is not None:
        text.finish_reason = chunk.finish_reason


async def _prime() -> None:
    """Load what httpcore loads on first use (anyio's event-loop backend), so the first
    probe does not time an import."""
    anyio.Lock()
    await anyio.lowlevel.checkpoint()


def _headers_of(response: httpcore.Response) -> dict[str, str]:
    """The response headers the prober reads, by lower-case name (the first of repeats)."""
    out: dict[str, str] = {}
    for name, value in response.headers:
        key = name.lower()
        if key in _KEPT_HEADERS and (k := key.decode("ascii")) not in out:
            out[k] = value.decode("latin-1")
    return out


async def _drain(response: httpcore.Response) -> bytes:
    """Read a little of an unwanted body so the connection can be reused; its first bytes."""
    read, head = 0, b""
    async for data in response.aiter_stream():
        read += len(data)
        if len(head) < _ERROR_HEAD:
            head += data[: _ERROR_HEAD - len(head)]
        if read > _ERROR_BODY_LIMIT:
            break
    return head


__all__ = ["PATHS", "SSE_BAD_EVENTS_ATTR", "ProbeSpec", "Prober", "read_api_key", "spec_for"]
