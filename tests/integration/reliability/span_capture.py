"""An OTLP/HTTP traces receiver on 127.0.0.1 that keeps every export it is sent, decoded and raw.

The raw bodies (decompressed) are what a scan for leaked text reads: every span name,
attribute, event and resource attribute is in them as plain UTF-8.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class SpanCapture:
    """What the receiver got: raw bodies and (service name, span name, attributes) per span."""

    def __init__(self) -> None:
        self.url = ""
        self.bodies: list[bytes] = []
        self.spans: list[tuple[str, str, dict[str, str]]] = []
        self.lock = threading.Lock()

    def add(self, body: bytes) -> None:
        """Keep one export request."""
        req = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            self.bodies.append(body)
            for rs in req.resource_spans:
                res = {kv.key: str(kv.value.string_value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        attrs = {kv.key: str(kv.value) for kv in span.attributes}
                        self.spans.append((res.get("service.name", ""), span.name, attrs))

    def services(self) -> set[str]:
        """The service names that exported spans."""
        with self.lock:
            return {service for service, _, _ in self.spans}


@contextmanager
def span_capture() -> Iterator[SpanCapture]:
    """Receive OTLP/HTTP protobuf traces at `capture.url` until the block exits."""
    capture = SpanCapture()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            capture.add(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    capture.url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield capture
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
