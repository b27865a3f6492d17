"""The OTLP/gRPC traces edge: `TraceService/Export` on grpc.aio, feeding the same span path as HTTP.

vLLM exports its `llm_request` spans over OTLP/gRPC unless told otherwise
(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL unset means `grpc`, without TLS), so this is the
receiver vLLM reaches with its own defaults. The method is served through a generic
handler on raw bytes, so the decoding is otlp.py's (`decode_protobuf`) and a body that
does not decode gets INVALID_ARGUMENT with the reason, not gRPC's generic INTERNAL.
gRPC itself refuses a message over `max_message_bytes` with RESOURCE_EXHAUSTED before
the handler runs (also after decompression), and more than `max_concurrent` calls at
once with RESOURCE_EXHAUSTED too. A refused call hands no span on.

`GrpcSpanReceiver` runs on the running event loop (the collector's); `ThreadedGrpcReceiver`
runs one on a thread with its own loop, for `lanewatch probe`, which keeps receiving off
the loop that times the probes, as its HTTP receiver does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from lanewatch.collector.collect.otlp import OtlpError, ServerSpan, decode_protobuf

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
METHOD = "Export"
DEFAULT_PORT = 4317  # the OTLP/gRPC convention
MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # as the HTTP receiver's body limit
MAX_CONCURRENT = 16

SpansSink = Callable[[list[ServerSpan]], None]
_EMPTY_RESPONSE: bytes = ExportTraceServiceResponse().SerializeToString()


@dataclass(frozen=True, slots=True)
class GrpcExport:
    """What to answer one Export call with: OK and its spans, or an error status and message."""

    code: grpc.StatusCode
    message: str = ""
    spans: list[ServerSpan] = field(default_factory=list)


def handle_grpc_export(body: bytes, max_message_bytes: int) -> GrpcExport:
    """Decode one Export request's bytes: OK with its spans, or why not."""
    if len(body) > max_message_bytes:  # gRPC refuses these first; kept for callers without gRPC's check
        too_big = f"message larger than {max_message_bytes} bytes"
        return GrpcExport(grpc.StatusCode.RESOURCE_EXHAUSTED, too_big)
    try:
        spans = decode_protobuf(body)
    except OtlpError as exc:
        return GrpcExport(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    return GrpcExport(grpc.StatusCode.OK, spans=spans)


class GrpcSpanReceiver:
    """Serves OTLP/gRPC `TraceService/Export` on the running loop; spans go to `on_spans` there."""

    def __init__(
        self,
        host: str,
        port: int,
        on_spans: SpansSink,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_concurrent: int = MAX_CONCURRENT,
    ) -> None:
        self.host = host
        self.port = 0
        self._requested_port = port
        self._on_spans = on_spans
        self._max = max_message_bytes
        self._max_concurrent = max_concurrent
        self._server: grpc.aio.Server | None = None

    async def start(self) -> int:
        """Bind and serve (OSError when the address cannot be bound); returns the bound port."""
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", self._max),
                ("grpc.so_reuseport", 0),  # a taken port is an error, not a second listener
            ],
            maximum_concurrent_rpcs=self._max_concurrent,
        )
        handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(self._export)
        # raw bytes in and out: the decoding, and its error status, are ours
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {METHOD: handler}),))
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
        return port

    async def shutdown(self, grace_s: float = 1.0) -> None:
        """Stop accepting; calls in flight get `grace_s` to finish."""
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None

    async def _export(self, body: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        result = handle_grpc_export(body, self._max)
        if result.code is not grpc.StatusCode.OK:
            await context.abort(result.code, result.message)
        self._on_spans(result.spans)
        return _EMPTY_RESPONSE


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
