"""An OTLP/gRPC traces endpoint in the test process that keeps every export and forwards it on.

vLLM exports over gRPC when OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is unset, so the session's
server sends here with its defaults. `TraceService/Export` is served through a generic handler
on raw bytes: each ExportTraceServiceRequest is kept as sent and handed, unchanged, to every
target a test adds: a lanewatch gRPC receiver (the same call) or an OTLP/HTTP receiver (a POST
of the same protobuf bytes, which is what OTLP/HTTP carries).
"""

from __future__ import annotations

import contextlib
import threading
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import grpc

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
METHOD = "Export"
FORWARD_TIMEOUT_S = 5.0

Forward = Callable[[bytes], None]


class SpanRelay:
    """Serves `TraceService/Export` on 127.0.0.1; keeps each request's bytes and forwards them."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self._targets: list[Forward] = []
        self._lock = threading.Lock()
        self._server = grpc.server(ThreadPoolExecutor(max_workers=4, thread_name_prefix="span-relay"))
        handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(self._export)
        generic = grpc.method_handlers_generic_handler(SERVICE, {METHOD: handler})
        self._server.add_generic_rpc_handlers((generic,))
        port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        # What vLLM's gRPC exporter takes: a plain-text endpoint without a path.
        self.url = f"http://127.0.0.1:{port}"

    def _export(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        self.received(body)
        return b""  # an empty ExportTraceServiceResponse

    def received(self, body: bytes) -> None:
        """Keep one export request and pass it to every target (a target that is down misses it)."""
        with self._lock:
            self.bodies.append(body)
            targets = list(self._targets)
        for forward in targets:
            # ValueError: a gRPC target's channel closed meanwhile (its block exited)
            with contextlib.suppress(OSError, ValueError, grpc.RpcError):
                forward(body)

    @contextmanager
    def forwarding_to(self, url: str) -> Iterator[None]:
        """Forward exports to an OTLP/HTTP receiver (a lanewatch `/v1/traces`) until the block exits."""

        def post(body: bytes) -> None:
            req = urllib.request.Request(url, body, {"content-type": "application/x-protobuf"}, method="POST")
            urllib.request.urlopen(req, timeout=FORWARD_TIMEOUT_S).close()

        with self._forwarding(post):
            yield

    @contextmanager
    def forwarding_over_grpc_to(self, address: str) -> Iterator[None]:
        """Forward exports to an OTLP/gRPC receiver at `address` (HOST:PORT) until the block exits."""
        with grpc.insecure_channel(address) as channel:
            # no serializers: raw bytes both ways
            export: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(f"/{SERVICE}/{METHOD}")

            def call(body: bytes) -> None:
                export(body, timeout=FORWARD_TIMEOUT_S)

            with self._forwarding(call):
                yield

    @contextmanager
    def _forwarding(self, forward: Forward) -> Iterator[None]:
        with self._lock:
            self._targets.append(forward)
        try:
            yield
        finally:
            with self._lock:
                self._targets.remove(forward)

    def snapshot(self) -> list[bytes]:
        """The export requests received so far."""
        with self._lock:
            return list(self.bodies)

    def close(self) -> None:
        """Stop serving."""
        self._server.stop(grace=1.0).wait(5.0)
