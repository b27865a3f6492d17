"""The OTLP/gRPC traces edge: `TraceService/Export` on grpc.aio, feeding the same span path as HTTP.

vLLM exports its `llm_request` spans over OTLP/gRPC unless told otherwise
(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL unset means `grpc`, without TLS), so this is the
receiver vLLM reaches with its own defaults. The method is served through a generic
handler on raw bytes, so the decoding is otlp.py's (`decode_protobuf`) and a body that
does not decode gets INVALID_ARGUMENT with the reason, not gRPC's generic INTERNAL.

One ingest path with `POST /v1/traces`: the same bearer tokens (`authorization` metadata,
`Bearer <token>`; without one UNAUTHENTICATED, before the message is read), the same
admission (`admit_spans`: NaN, infinite or negative times refused, at most `max_spans` per
call) and the same answer, an ExportTraceServiceResponse whose `partial_success` counts the
refused spans and says why. A refused call hands no span on.

A slow client is bounded: gRPC refuses a message over `max_message_bytes` with
RESOURCE_EXHAUSTED (also after decompression); one connection opens at most
`streams_per_connection` streams at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS), so it
cannot take every one of the `max_concurrent` call slots; a call whose message has not
arrived within `read_timeout_s` ends with DEADLINE_EXCEEDED and frees its slot; and a
connection is closed after `max_connection_age_s` (with a grace for calls in flight). After
calls have come, the receiver gives freed heap back to the OS every TRIM_EVERY_S
(collect/heap.py), so a flood of calls reset at once does not leave the process its size.

The same listener serves `LogsService/Export` when given a logs sink: Envoy's OpenTelemetry
access logger sends its entries there (otlp_logs.py decodes and admits them, envoy_log.py maps
them), under the same tokens (a reporter's own token needs `envoy` among its feeds, else
PERMISSION_DENIED), message size, call slots and read deadline; refused log records are counted
in the answer's `partial_success.rejected_log_records`.

`GrpcSpanReceiver` runs on the running event loop (the collector's); `ThreadedGrpcReceiver`
runs one on a thread with its own loop, for `lanewatch probe`, which keeps receiving off
the loop that times the probes, as its HTTP receiver does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message

from lanewatch.collector.collect.credentials import Credential, IngestKeys, as_auth
from lanewatch.collector.collect.envoy_log import DEFAULT_CLASS
from lanewatch.collector.collect.heap import trim
from lanewatch.collector.collect.otlp import OFF_LOOP_BYTES, admit_spans, decode_protobuf, trace_response
from lanewatch.collector.collect.otlp_logs import (
    LOGS_SERVICE,
    MAX_LOG_RECORDS,
    LogsAdmission,
    admit_logs,
    decode_logs_protobuf,
    logs_response,
)
from lanewatch.collector.collect.otlp_wire import Admission, OtlpError
from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.timing import RequestTiming

log = logging.getLogger(__name__)
SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
METHOD = "Export"
DEFAULT_PORT = 4317  # the OTLP/gRPC convention
MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # as the HTTP receiver's body limit
MAX_SPANS = 2048  # per call, as the HTTP receiver's per-request bound
MAX_CONCURRENT = 16
STREAMS_PER_CONNECTION = 4  # of the MAX_CONCURRENT call slots, one connection holds at most these
READ_TIMEOUT_S = 10.0  # from a call's start until its whole message has arrived
MAX_CONNECTION_AGE_S = 300.0  # then GOAWAY: a sender reconnects (vLLM's exporter does so by itself)
CONNECTION_AGE_GRACE_S = 10.0  # calls in flight on a connection past its age get this long to finish
TRIM_EVERY_S = 5.0  # after calls came: how often freed heap goes back to the OS

SpansSink = Callable[[list[ServerSpan]], None]
RefusedSink = Callable[[Mapping[str, int]], None]  # spans refused, by reason (otlp.REFUSED_*)
# the records of one logs call and its refused count, and the sender's reporter name (None: the
# shared token, or an open ingest)
LogsSink = Callable[[LogsAdmission, str | None], None]


E = TypeVar("E")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GrpcExport(Generic[T]):
    """What to answer one Export call with: OK with the admitted items and the answer's bytes, or
    an error status and message."""

    code: grpc.StatusCode
    message: str = ""
    admission: Admission[T] = field(default_factory=Admission)
    body: bytes = b""  # the serialized Export*ServiceResponse (a partial success when items were refused)

    @property
    def kept(self) -> list[T]:
        """The items admitted."""
        return self.admission.kept


def handle_grpc(
    body: bytes,
    max_message_bytes: int,
    decode: Callable[[bytes], list[E]],
    admit_items: Callable[[list[E]], Admission[T]],
    respond: Callable[[Admission[T]], Message],
) -> GrpcExport[T]:
    """Decode and admit one Export request's bytes: OK with its items (refused ones counted), or why not."""
    if len(body) > max_message_bytes:  # gRPC refuses these first; kept for callers without gRPC's check
        too_big = f"message larger than {max_message_bytes} bytes"
        return GrpcExport(grpc.StatusCode.RESOURCE_EXHAUSTED, too_big)
    try:
        items = decode(body)
    except OtlpError as exc:
        return GrpcExport(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    admission = admit_items(items)
    return GrpcExport(grpc.StatusCode.OK, admission=admission, body=respond(admission).SerializeToString())


def handle_grpc_export(
    body: bytes, max_message_bytes: int, max_spans: int | None = MAX_SPANS, peer: str = ""
) -> GrpcExport[ServerSpan]:
    """One TraceService/Export request: OK with its `llm_request` spans, or why not."""
    return handle_grpc(
        body,
        max_message_bytes,
        lambda raw: decode_protobuf(raw, peer),
        lambda spans: admit_spans(spans, max_spans),
        trace_response,
    )


def handle_grpc_logs(
    body: bytes,
    max_message_bytes: int,
    max_records: int | None = MAX_LOG_RECORDS,
    default_class: str = DEFAULT_CLASS,
    received_at: float | None = None,
) -> GrpcExport[RequestTiming]:
    """One LogsService/Export request: OK with the records its access-log entries became, or why not
    (`received_at`, wall clock: when it arrived, for the entries' starts)."""
    return handle_grpc(
        body,
        max_message_bytes,
        decode_logs_protobuf,
        lambda entries: admit_logs(entries, max_records, default_class, received_at),
        logs_response,
    )


def peer_host(peer: str) -> str:
    """The host of a gRPC peer string (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`); the string otherwise."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return peer[:64]
    host = rest.rpartition(":")[0] or rest
    return host.removeprefix("[").removesuffix("]")


def caller(metadata: Any, keys: IngestKeys) -> Credential | None:
    """The credential of the call's `authorization` metadata (`Bearer <token>`; one value); None: no match."""
    values = [v for k, v in metadata or () if k == "authorization"]
    header = values[0] if len(values) == 1 and isinstance(values[0], str) else None
    return as_auth(keys).identify(header)


@dataclass(frozen=True, slots=True)
class GrpcLimits:
    """What bounds one sender: see the module docstring."""

    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_spans: int = MAX_SPANS
    max_log_records: int = MAX_LOG_RECORDS
    default_class: str = DEFAULT_CLASS  # of an access-log record without a request class
    max_concurrent: int = MAX_CONCURRENT
    streams_per_connection: int = STREAMS_PER_CONNECTION
    read_timeout_s: float = READ_TIMEOUT_S
    max_connection_age_s: float = MAX_CONNECTION_AGE_S

    def server_options(self) -> list[tuple[str, int]]:
        """The grpc.aio server options that carry these limits."""
        return [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_concurrent_streams", min(self.streams_per_connection, self.max_concurrent)),
            ("grpc.max_connection_age_ms", int(self.max_connection_age_s * 1000)),
            ("grpc.max_connection_age_grace_ms", int(CONNECTION_AGE_GRACE_S * 1000)),
            ("grpc.so_reuseport", 0),  # a taken port is an error, not a second listener
        ]


class GrpcSpanReceiver:
    """Serves OTLP/gRPC `TraceService/Export` on the running loop; spans go to `on_spans` there."""

    def __init__(
        self,
        host: str,
        port: int,
        on_spans: SpansSink,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_concurrent: int = MAX_CONCURRENT,
        *,
        token: IngestKeys = None,
        on_refused: RefusedSink | None = None,
        limits: GrpcLimits | None = None,
        on_logs: LogsSink | None = None,
    ) -> None:
        self.host = host
        self.port = 0
        self._requested_port = port
        self._on_spans = on_spans
        self._on_refused = on_refused
        self._on_logs = on_logs
        self._auth = as_auth(token)
        # `limits` whole, or the two older keyword limits with the defaults for the rest
        self.limits = limits or GrpcLimits(max_message_bytes=max_message_bytes, max_concurrent=max_concurrent)
        self._server: grpc.aio.Server | None = None
        self._calls = 0  # calls started since the last trim
        self._trimmer: asyncio.Task[None] | None = None

    async def start(self) -> int:
        """Bind and serve (OSError when the address cannot be bound); returns the bound port."""
        server = grpc.aio.server(
            options=self.limits.server_options(), maximum_concurrent_rpcs=self.limits.max_concurrent
        )
        # A stream-unary handler on raw bytes: on the wire the same as unary, but it runs when the
        # call starts, so the token is checked and the read deadline runs before any message arrives.
        handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.stream_unary_rpc_method_handler(self._export)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {METHOD: handler}),))
        if self._on_logs is not None:
            logs: grpc.RpcMethodHandler[bytes, bytes] = grpc.stream_unary_rpc_method_handler(
                self._export_logs
            )
            server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler(LOGS_SERVICE, {METHOD: logs}),)
            )
        host = f"[{self.host}]" if ":" in self.host else self.host
        address = f"{host}:{self._requested_port}"
        try:
            port = server.add_insecure_port(address)
        except RuntimeError:  # grpcio raises this when it cannot bind (older versions return 0)
            port = 0
        if port == 0:
            raise OSError(f"cannot bind {address} (taken, or not an address of this machine)")
        await server.start()
        self._server, self.port = server, port
        self._trimmer = asyncio.create_task(self._trim_loop(), name="otlp-grpc-trim")
        return port

    async def shutdown(self, grace_s: float = 1.0) -> None:
        """Stop accepting; calls in flight get `grace_s` to finish."""
        if self._trimmer is not None:
            self._trimmer.cancel()
            await asyncio.gather(self._trimmer, return_exceptions=True)
            self._trimmer = None
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None

    async def _trim_loop(self) -> None:
        while True:
            await asyncio.sleep(TRIM_EVERY_S)
            if self._calls:
                self._calls = 0
                await asyncio.to_thread(trim)

    async def _export(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> bytes:
        _sender, body = await self._admitted_body(context)
        args = (body, self.limits.max_message_bytes, self.limits.max_spans, peer_host(context.peer()))
        if len(body) > OFF_LOOP_BYTES:
            result = await asyncio.to_thread(handle_grpc_export, *args)
        else:
            result = handle_grpc_export(*args)
        if result.code is not grpc.StatusCode.OK:
            await context.abort(result.code, result.message)
        refused = result.admission.refused()
        if refused:
            log.warning(
                "rejected %d llm_request spans (%s)", result.admission.rejected, result.admission.reason
            )
            if self._on_refused is not None:
                self._on_refused(refused)
        self._on_spans(result.kept)
        return result.body

    async def _export_logs(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> bytes:
        sender, body = await self._admitted_body(context, "envoy")
        lim = self.limits
        args = (body, lim.max_message_bytes, lim.max_log_records, lim.default_class, time.time())
        if len(body) > OFF_LOOP_BYTES:
            result = await asyncio.to_thread(handle_grpc_logs, *args)
        else:
            result = handle_grpc_logs(*args)
        if result.code is not grpc.StatusCode.OK:
            await context.abort(result.code, result.message)
        admission = result.admission
        if admission.rejected:
            log.warning("rejected %d access-log records (%s)", admission.rejected, admission.reason)
        if self._on_logs is not None:
            self._on_logs(admission, sender.name)
        return result.body

    async def _admitted_body(
        self, context: grpc.aio.ServicerContext[bytes, bytes], feed: str | None = None
    ) -> tuple[Credential, bytes]:
        """The caller and the call's message, once its token (and that it may send `feed`) is
        checked: the call ends without the right one."""
        self._calls += 1
        sender = caller(context.invocation_metadata(), self._auth)
        if sender is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        assert sender is not None  # abort raises
        if feed is not None and not sender.may_send(feed):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{sender.label} may not send feed {feed}")
        return sender, await self._read_one(context)

    async def _read_one(self, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        """The call's one message, within the read deadline (the call ends otherwise)."""
        timeout = self.limits.read_timeout_s
        try:
            async with asyncio.timeout(timeout):
                body = await context.read()
        except TimeoutError:
            await context.abort(
                grpc.StatusCode.DEADLINE_EXCEEDED, f"no whole request message within {timeout} s"
            )
        if not isinstance(body, bytes):  # grpc.aio.EOF: the client closed without a message
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")
        return body


class ThreadedGrpcReceiver:
    """A GrpcSpanReceiver on its own thread and event loop; spans go to `on_spans` on that thread."""

    def __init__(self, host: str, port: int, on_spans: SpansSink, **limits: Any) -> None:
        self.host = host
        self.port = 0
        self._receiver = GrpcSpanReceiver(host, port, on_spans, **limits)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout_s: float = 10.0) -> int:
        """Bind (OSError when the address is taken) and serve on a thread; returns the bound port."""
        ready = threading.Event()
        failure: list[BaseException] = []

        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            try:
                self.port = await self._receiver.start()
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            try:
                await self._stop.wait()
            finally:
                await self._receiver.shutdown()

        self._thread = threading.Thread(target=lambda: asyncio.run(main()), name="otlp-grpc", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s):
            self.shutdown()
            raise OSError(f"the gRPC span receiver did not start on {self.host}")
        if failure:
            self._thread.join(timeout_s)
            exc = failure[0]
            raise exc if isinstance(exc, OSError) else OSError(str(exc))
        return self.port

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop serving and wait for the thread."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the thread is ending
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None


def grpc_endpoint_url(host: str, port: int) -> str:
    """The `--otlp-traces-endpoint` value vLLM's gRPC exporter takes (plain text, no path)."""
    from lanewatch.collector.collect.otlp_http import endpoint_url

    return endpoint_url(host, port).removesuffix("/v1/traces")
