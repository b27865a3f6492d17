"""The active prober: one streamed completion, measured phase by phase into a RequestTiming.

Phases are stamped as the probe passes them: DNS, TCP connect and TLS apart (transport.py),
the request's write, the response head. The first content chunk and every gap after it are
stamped in the callback of the read that brought them, before any parsing. Every failure
maps to one `ErrorKind`; `probe()` never raises for a failed request. Prompt and response
text reach the record and span only with `record_content` (export.record_content).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

from opentelemetry.trace import Tracer

from lanewatch.collector.common.headers import AUTHORIZATION, DEGRADED_HEADER, LANE_HEADER, REQUEST_ID
from lanewatch.collector.common.secrets import read_secret_or_none
from lanewatch.collector.http1.client import UpstreamConn, UpstreamGone
from lanewatch.collector.http1.message import HttpError, ResponseHead
from lanewatch.collector.http1.sse import ChunkKind, SseParser, StreamChunk
from lanewatch.collector.openai_api.error_detail import error_detail
from lanewatch.collector.openai_api.response_metrics import ResponseMetrics
from lanewatch.collector.openai_api.usage import Usage
from lanewatch.collector.probe.errors import failure_kind, failure_message
from lanewatch.collector.probe.prompts import prompt_text
from lanewatch.collector.probe.settings import RequestClass, Target, Timeouts
from lanewatch.collector.probe.spans import finish_probe_span, start_probe_span, trace_headers
from lanewatch.collector.probe.transport import ConnectTimes, ProbeConnections, ssl_context
from lanewatch.collector.progress.inflight import InFlight
from lanewatch.collector.record.builder import RecordBuilder
from lanewatch.collector.record.content import StreamedText, truncate
from lanewatch.collector.record.itl import MAX_ITL_SAMPLES, Gaps, GapSampler
from lanewatch.collector.record.timing import Api, ErrorKind, RequestTiming, error_kind_for_status

log = logging.getLogger(__name__)

PATHS: dict[Api, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
SSE_BAD_EVENTS_ATTR = "sse_bad_events"  # record attr: undecodable SSE events in the stream
_ERROR_BODY_LIMIT = 64 * 1024
_ERROR_HEAD = 8 * 1024  # bytes of an error body kept to find the server's message in
_AFTER_DONE_S = 1.0  # how long to wait for the body's end after `data: [DONE]`
_USER_AGENT = "lanewatch-probe"
_KEPT_HEADERS = ("x-request-id", "x-lanewatch-lane", "x-lanewatch-degraded", "content-type")


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
        self.send_at: float | None = None
        self.send_end: float | None = None
        self.headers_at: float | None = None
        self.content: list[float] = []  # read time of each content chunk since the last fold
        self.first_content: float | None = None  # read time of the first content chunk
        self.folded = 0  # content chunks folded into `itl` (a long stream's, kept bounded)
        self.itl = GapSampler()
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
        self.flight: int | None = None  # its id in the fast guard's in-flight table, once sent
        self.on_first_token: Callable[[], None] | None = None  # the caller's, told at the first token

    def offset(self, t: float | None) -> float | None:
        return None if t is None else t - self.t0

    def fold(self) -> None:
        """Fold the read times so far into sampled gaps (itl.py), keeping the last one to go on from."""
        content = self.content
        self.itl.take([b - a for a, b in pairwise(content)])
        self.folded += len(content) - 1
        del content[:-1]

    def gaps(self) -> Gaps:
        """The record's itl_s and itl_stats: every gap, or an even sample and exact totals."""
        return self.itl.result([b - a for a, b in pairwise(self.content)])

    def intervals(self) -> dict[str, tuple[float, float]]:
        """Phase spans as (start, end) offsets, for the trace."""
        out: dict[str, tuple[float, float]] = {}
        if self.connect_at is not None:
            c = self.connect_at - self.t0
            out["dns"] = (c, c + self.conn.dns_s)
            out["connect"] = (c + self.conn.dns_s, c + self.conn.dns_s + self.conn.connect_s)
        tls_at, tls_end = self.conn.tls_started, self.conn.tls_ended
        if tls_at is not None and tls_end is not None:
            out["tls"] = (tls_at - self.t0, tls_end - self.t0)
        if self.send_at is not None and self.send_end is not None:
            out["send"] = (self.send_at - self.t0, self.send_end - self.t0)
            if self.first_content is not None:
                out["server_wait"] = (self.send_end - self.t0, self.first_content - self.t0)
        if self.first_content is not None and self.end is not None:
            out["decode"] = (self.first_content - self.t0, self.end - self.t0)
        return out


class _Reader:
    """The body sink of one probe: each read is stamped and parsed in the read's own callback."""

    def __init__(self, run: _Run, conn: UpstreamConn) -> None:
        self.run = run
        self.conn = conn
        self.parser = SseParser(keep_text=run.text is not None)
        self.streaming: bool | None = None  # decided by the head on the first payload
        self.stream_error = False
        self.kept = b""  # the first bytes of a body that is not the stream (an error's reason)
        self.read = 0
        self.enough = False  # stop reading: an unwanted body ran past _ERROR_BODY_LIMIT, or the stream broke

    def payload(self, data: bytes) -> None:
        """Take one read's payload: content chunks are stamped before any parsing."""
        now = time.perf_counter()
        if self.streaming is None:
            head = self.conn.response_head
            self.streaming = head is not None and _is_stream(head)
        if not self.streaming:
            self._keep(data)
            return
        run, text, parser = self.run, self.run.text, self.parser
        chunks = parser.feed(data)
        if parser.failure is not None and not self.enough:
            self.enough = True  # the stream is broken past repair: stop reading it
            self.conn.pause()
        for chunk in chunks:
            if run.done_at is not None:
                continue
            kind = chunk.kind
            if kind is ChunkKind.CONTENT:
                content = run.content
                content.append(now)
                if len(content) == 1 and run.first_content is None:
                    run.first_content = now
                    self.conn.wake()  # from now on the probe waits under the stall limit
                    if run.on_first_token is not None:
                        run.on_first_token()
                elif len(content) > MAX_ITL_SAMPLES:
                    run.fold()
            elif kind is ChunkKind.DONE:
                run.done_at = now  # read on only to reuse the connection, and not for long
                self.conn.wake()
            elif kind is ChunkKind.ERROR:
                self.stream_error = True
                run.error_message = run.error_message or chunk.message
            if chunk.usage is not None:
                run.usage = chunk.usage
            if chunk.metrics is not None:
                run.metrics = chunk.metrics
            if text is not None:
                _keep_text(text, chunk)

    def finish(self) -> None:
        """The body ended: what the stream as a whole says."""
        run, parser = self.run, self.parser
        parser.close()
        run.bad_events = parser.bad_events
        if parser.bad_events:  # for lanewatch_sse_bad_data_total
            run.attrs[SSE_BAD_EVENTS_ATTR] = str(parser.bad_events)
        if parser.failure is not None:
            run.error, run.error_message = ErrorKind.BAD_STREAM, parser.failure
        elif self.stream_error:
            run.error = ErrorKind.STREAM_ERROR
        elif parser.bad_events:
            run.error = ErrorKind.BAD_STREAM
        elif run.done_at is None:
            run.error = ErrorKind.TRUNCATED

    def _keep(self, data: bytes) -> None:
        self.read += len(data)
        if len(self.kept) < _ERROR_HEAD:
            self.kept += data[: _ERROR_HEAD - len(self.kept)]
        if self.read > _ERROR_BODY_LIMIT and not self.enough:
            self.enough = True
            self.conn.pause()  # which wakes the probe: the connection is dropped, not drained


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
        in_flight: InFlight | None = None,
    ) -> None:
        self.target = target
        self.in_flight = in_flight  # probes under way, for the fast guard (progress/inflight.py)
        self.record_content = record_content  # prompt and response text on records and spans
        self.timeouts = timeouts or Timeouts()
        self._tracer = tracer  # None: no exporter, so no span is built (a traceparent still goes out)
        parts = urlsplit(target.url)
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._api_key = read_api_key(target)
        tls = ssl_context(target.cacert, target.insecure) if parts.scheme == "https" else None
        self._conns = ProbeConnections(
            self._host, self._port, tls, connection=connection, max_idle=max_connections
        )
        # Built once per target: each API's request line and the headers every request carries.
        netloc = parts.netloc.rpartition("@")[2]
        fixed = {"host": netloc.encode("idna").decode("ascii"), "user-agent": _USER_AGENT}
        fixed |= {"content-type": "application/json", "accept": "text/event-stream"}
        if self._api_key:
            fixed[AUTHORIZATION] = f"Bearer {self._api_key}"
        if target.lane != "default":
            fixed[LANE_HEADER] = target.lane
        self._fixed_headers = _header_lines(fixed)
        self._request_lines = {api: _request_line(target.url + path) for api, path in PATHS.items()}

    async def __aenter__(self) -> Prober:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close kept-alive connections."""
        self._conns.close()

    async def probe(
        self,
        spec: ProbeSpec,
        timeouts: Timeouts | None = None,
        on_first_token: Callable[[], None] | None = None,
    ) -> RequestTiming:
        """Send one streamed request and measure it (`timeouts` overrides the prober's; `on_first_token`
        is called when its first token comes)."""
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
        headers[REQUEST_ID] = sent_id
        run = _Run(time.perf_counter(), start_ns, StreamedText() if self.record_content else None)
        run.on_first_token = on_first_token
        try:
            await self._exchange(spec, run, headers, timeouts or self.timeouts)
        except Exception as exc:  # every failure becomes an error kind, never a crash
            run.error = failure_kind(exc, run.phase, run.conn.resolving)
            run.error_message = run.error_message or failure_message(exc)
            log.debug("probe of %s failed in phase %s: %s", self.target.name, run.phase, run.error)
        except BaseException:  # cancelled: no record, but no span left open either
            if span is not None:
                span.end()
            raise
        finally:
            self._landed(run)
        run.end = run.done_at or run.end or time.perf_counter()
        record = self._record(spec, run, started_at, trace_id, sent_id)
        if tracer is not None and span is not None:
            finish_reason = run.text.finish_reason if run.text is not None else None
            finish_probe_span(tracer, span, record, run.intervals(), run.t0_ns, finish_reason)
        return record

    def _request(self, spec: ProbeSpec, headers: dict[str, str]) -> bytes:
        body = spec.body(self.target.model)
        return b"".join(
            (
                self._request_lines[spec.api],
                self._fixed_headers,
                _header_lines(headers),
                b"content-length: %d\r\n\r\n" % len(body),
                body,
            )
        )

    async def _exchange(self, spec: ProbeSpec, run: _Run, headers: dict[str, str], t: Timeouts) -> None:
        request = self._request(spec, headers)
        # The clock starts here: building the request is not the request's time.
        run.t0, run.t0_ns = time.perf_counter(), time.time_ns()
        conn = self._conns.take_idle()
        if conn is not None:
            try:
                await self._send_and_read(conn, request, run, t)
                return
            except UpstreamGone as exc:
                if not exc.fresh or run.phase != "wait":
                    raise
            # The server closed the kept-alive connection as the request went out: nothing of
            # this target's latency. Once more on a new connection, on a clock started again.
            log.debug(
                "probe of %s: kept-alive connection closed by the server; reconnecting", self.target.name
            )
            run.send_at = run.send_end = None
            run.t0, run.t0_ns = time.perf_counter(), time.time_ns()
        conn = await self._open(run, t)
        await self._send_and_read(conn, request, run, t)

    async def _open(self, run: _Run, t: Timeouts) -> UpstreamConn:
        run.phase, run.connect_at = "connect", time.perf_counter()
        try:
            async with asyncio.timeout(min(t.connect_s, t.ttft_s, t.total_s)):
                return await self._conns.open(run.conn)
        except BaseException:
            if run.conn.phase == "tls":
                run.phase = "tls"
            raise

    async def _send_and_read(self, conn: UpstreamConn, request: bytes, run: _Run, t: Timeouts) -> None:
        perf = time.perf_counter
        total_at = run.t0 + t.total_s
        first_at = min(total_at, run.t0 + t.ttft_s)
        try:
            run.phase, run.send_at = "send", perf()
            conn.send(request)
            run.send_end, run.phase = perf(), "wait"
            self._in_flight(run, run.send_end)
            reader = _Reader(run, conn)
            conn.attach(reader)
            try:
                head = await conn.head(first_at - perf())
            except TimeoutError:
                run.error, run.end = ErrorKind.TTFT_TIMEOUT, perf()
                return
            run.headers_at, run.phase = conn.head_at or perf(), "body"
            self._take_head(head, run)
            if reader.streaming is None:  # no payload came with the head
                reader.streaming = _is_stream(head)
            while not conn.done and not reader.enough:
                if run.done_at is not None:
                    deadline = min(total_at, run.done_at + _AFTER_DONE_S)
                elif not run.content:
                    deadline = first_at
                else:
                    deadline = min(total_at, run.content[-1] + t.stall_s)
                left = deadline - perf()
                if left <= 0:
                    run.end = perf()
                    if run.done_at is None:  # after [DONE] the server just did not end the body
                        run.error = _late_kind(run, deadline == total_at)
                    return
                try:
                    await conn.wait_end(left)
                except (UpstreamGone, HttpError):
                    if run.done_at is None:
                        raise
                    return  # the answer was whole at [DONE]; only the connection's end broke
            run.end = perf()
            if reader.streaming:
                reader.finish()
            elif run.error is None:
                run.error = ErrorKind.BAD_STREAM  # a 2xx answer that is not an event stream
            if run.error is not None and run.status is not None and run.status >= 400:
                run.error_message = error_detail(reader.kept)
        finally:
            self._conns.release(conn)

    def _in_flight(self, run: _Run, sent: float) -> None:
        """Put the probe in the fast guard's table from the end of its send (docs/slo.md, "The evidence
        contract"): connecting and sending are the prober's own time, as a client's upload is."""
        table = self.in_flight
        if table is None:
            return
        self._landed(run)  # sent again on a new connection: the first send was never the lane's
        run.flight = table.start(self.target.lane, sent, lambda: run.first_content)

    def _landed(self, run: _Run) -> None:
        """Take the probe out of the in-flight table (its first token, if any, is reported once more)."""
        if self.in_flight is not None and run.flight is not None:
            self.in_flight.end(run.flight)
            run.flight = None

    def _take_head(self, head: ResponseHead, run: _Run) -> None:
        run.status = head.status
        kept = _headers_of(head)
        run.request_id = kept.get(REQUEST_ID)
        for name in (LANE_HEADER, DEGRADED_HEADER):
            if name in kept:
                run.attrs[name.removeprefix("x-lanewatch-")] = kept[name][:64]
        run.error = error_kind_for_status(head.status)

    def _record(
        self, spec: ProbeSpec, run: _Run, started_at: float, trace_id: str | None, sent_id: str
    ) -> RequestTiming:
        connected = run.connect_at is not None
        reused = not connected and run.send_at is not None  # no connection.* events: pooled
        tls_at, tls_end = run.conn.tls_started, run.conn.tls_ended
        if tls_at is not None and tls_end is not None:
            tls_s: float | None = tls_end - tls_at
        else:  # reused, or plain HTTP once the request went out; unknown if it failed before
            tls_s = 0.0 if run.send_at is not None else None
        b = RecordBuilder(
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
            error_message=run.error_message,
            dns_s=run.conn.dns_s if connected else (0.0 if reused else None),
            connect_s=run.conn.connect_s if connected and run.conn.address else (0.0 if reused else None),
            tls_s=tls_s,
            send_s=(run.send_end - run.send_at) if run.send_at and run.send_end else None,
            ttfb_s=run.offset(run.headers_at),
            ttft_s=run.offset(run.first_content),
            e2e_s=run.offset(run.end),
            usage=run.usage,
            counted_tokens=run.folded + len(run.content),  # content chunks seen
            metrics=run.metrics,
            attrs=run.attrs,
            prompt_text=truncate(spec.prompt) if self.record_content else None,
            # no response at all (it failed before one came) is no text rather than empty text
            response_text=run.text.text() if run.text is not None and run.status is not None else None,
        )
        b.itl_s, b.itl_stats = run.gaps()
        return b.build()


def read_api_key(target: Target) -> str | None:
    """The target's API key from its file; a clear error names the field."""
    return read_secret_or_none(target.api_key_file, f"targets[{target.name}].api_key_file")


def _keep_text(text: StreamedText, chunk: StreamChunk) -> None:
    """Add a chunk's text and finish reason to the response kept for the record."""
    if chunk.text:
        text.add(chunk.text)
    if chunk.finish_reason is not None:
        text.finish_reason = chunk.finish_reason


def _is_stream(head: ResponseHead) -> bool:
    """A successful answer that is an event stream (or does not say what it is)."""
    ctype = head.get("content-type") or ""
    return error_kind_for_status(head.status) is None and (not ctype or ctype.startswith("text/event-stream"))


def _late_kind(run: _Run, at_total: bool) -> ErrorKind:
    """The error kind of a probe whose deadline passed while it waited for the body."""
    if not run.content:
        return ErrorKind.TTFT_TIMEOUT
    return ErrorKind.TIMEOUT if at_total else ErrorKind.STALL


def _request_line(url: str) -> bytes:
    """`POST <path> HTTP/1.1` for a target URL with the API's path on it."""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return f"POST {target} HTTP/1.1\r\n".encode("ascii")


def _header_lines(headers: dict[str, str]) -> bytes:
    """Header fields as sent; a value with CR, LF or NUL (a smuggled header) is refused."""
    out = []
    for name, value in headers.items():
        if any(c in value for c in "\r\n\x00"):
            raise ValueError(f"header {name} holds a line break or NUL")
        out.append(f"{name}: {value}\r\n")
    return "".join(out).encode("latin-1")


def _headers_of(head: ResponseHead) -> dict[str, str]:
    """The response headers the prober reads, by lower-case name (the first of repeats)."""
    out: dict[str, str] = {}
    for name, value in head.headers:
        key = name.lower()
        if key in _KEPT_HEADERS and key not in out:
            out[key] = value
    return out


__all__ = ["PATHS", "SSE_BAD_EVENTS_ATTR", "ProbeSpec", "Prober", "read_api_key", "spec_for"]
