"""The OTLP/HTTP traces edge: `POST /v1/traces` as an ASGI route, and a receiver on its own thread.

`traces_endpoint` reads the body (bounded) and answers with otlp.py's `handle_export`; the
collector mounts it on its app. `SpanReceiver` serves that route alone with uvicorn on a
thread with its own event loop, for `lanewatch probe --otlp-listen`: reading and decoding
span bodies then happens away from the loop that times the probes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request, Response

from lanewatch.collector.collect.credentials import IngestKeys, as_auth
from lanewatch.collector.collect.otlp import OFF_LOOP_BYTES, handle_export
from lanewatch.collector.collect.otlp_logs import MAX_LOG_RECORDS, LogsAdmission, handle_logs_export
from lanewatch.collector.collect.otlp_wire import forbidden, too_large, unauthorized
from lanewatch.collector.common.serving import read_limited
from lanewatch.collector.record.evidence import ServerSpan

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger(__name__)
TRACES_PATH = "/v1/traces"
MAX_BODY_BYTES = 8 * 1024 * 1024  # as the collector's otlp.max_body_bytes default
MAX_SPANS_PER_REQUEST = 2048  # as the collector's otlp.max_spans_per_request default

SpansSink = Callable[[list[ServerSpan]], None]
RefusedSink = Callable[[Mapping[str, int]], None]  # spans refused, by reason (otlp.REFUSED_*)
# the records of one logs request and its refused count, and the sender's reporter name (None: the
# shared token, or an open ingest)
LogsSink = Callable[[LogsAdmission, str | None], None]


def traces_endpoint(
    max_body_bytes: int,
    receive: SpansSink,
    token: IngestKeys = None,
    max_spans: int | None = MAX_SPANS_PER_REQUEST,
    on_refused: RefusedSink | None = None,
) -> Callable[[Request], Awaitable[Response]]:
    """The POST /v1/traces handler: decoded `llm_request` spans go to `receive`.

    With `token`, the sender must present one of its tokens as a bearer token (the collector
    passes its ingest credentials, so one token covers records and spans). Refused spans are
    counted to `on_refused`.
    """
    auth = as_auth(token)

    async def traces(request: Request) -> Response:
        ctype = request.headers.get("content-type")
        if auth.identify(request.headers.get("authorization")) is None:
            result = unauthorized(ctype)
            return Response(
                result.body,
                status_code=result.status,
                media_type=result.media_type,
                headers={"WWW-Authenticate": "Bearer"},
            )
        body = await read_limited(request, max_body_bytes)
        if body is None:
            result = too_large(ctype, max_body_bytes)
        else:
            encoding = request.headers.get("content-encoding")
            peer = request.client.host if request.client is not None else ""
            args = (body, ctype, encoding, max_body_bytes, max_spans, peer)
            gzipped = (encoding or "").strip().lower() == "gzip"  # small on the wire, maybe not inflated
            if len(body) > OFF_LOOP_BYTES or gzipped:
                result = await asyncio.to_thread(handle_export, *args)
            else:
                result = handle_export(*args)
            if result.rejected:
                log.warning("rejected %d llm_request spans (%s)", result.rejected, result.reason)
                if on_refused is not None:
                    on_refused(result.admission.refused())
            receive(result.kept)
        return Response(result.body, status_code=result.status, media_type=result.media_type)

    return traces


def logs_endpoint(
    max_body_bytes: int,
    receive: LogsSink,
    token: IngestKeys = None,
    max_records: int | None = MAX_LOG_RECORDS,
    default_class: str = "interactive",
) -> Callable[[Request], Awaitable[Response]]:
    """The POST /v1/logs handler: Envoy's access-log entries, as records, go to `receive` (otlp_logs.py).

    The same tokens as /v1/traces and /v1/records; a reporter's own token must have `envoy`
    among its feeds (403 otherwise), and its name goes to `receive` with the records. Each log
    record is refused alone and counted in the answer's partial success.
    """
    auth = as_auth(token)

    async def logs(request: Request) -> Response:
        ctype = request.headers.get("content-type")
        sender = auth.identify(request.headers.get("authorization"))
        if sender is None:
            denied = unauthorized(ctype)
            headers = {"WWW-Authenticate": "Bearer"}
            return Response(denied.body, status_code=401, media_type=denied.media_type, headers=headers)
        if not sender.may_send("envoy"):
            no = forbidden(ctype, f"{sender.label} may not send access logs (feed envoy)")
            return Response(no.body, status_code=403, media_type=no.media_type)
        body = await read_limited(request, max_body_bytes)
        if body is None:
            big = too_large(ctype, max_body_bytes)
            return Response(big.body, status_code=big.status, media_type=big.media_type)
        encoding = request.headers.get("content-encoding")
        args = (body, ctype, encoding, max_body_bytes, max_records, default_class, time.time())
        if len(body) > OFF_LOOP_BYTES or (encoding or "").strip().lower() == "gzip":
            result = await asyncio.to_thread(handle_logs_export, *args)
        else:
            result = handle_logs_export(*args)
        if result.admission.rejected:
            log.warning(
                "rejected %d access-log records (%s)", result.admission.rejected, result.admission.reason
            )
        if result.status == 200:
            receive(result.admission, sender.name)
        return Response(result.body, status_code=result.status, media_type=result.media_type)

    return logs


def endpoint_url(host: str, port: int) -> str:
    """The traces URL a server should send to; a wildcard address is shown as this host's name."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}{TRACES_PATH}"


class SpanReceiver:
    """Serves POST /v1/traces on its own thread and event loop; spans go to `on_spans` on that thread."""

    def __init__(
        self, host: str, port: int, on_spans: SpansSink, max_body_bytes: int = MAX_BODY_BYTES
    ) -> None:
        self.host = host
        self._requested_port = port
        self._on_spans = on_spans
        self._max_body_bytes = max_body_bytes
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.port = 0

    def start(self, timeout_s: float = 10.0) -> int:
        """Bind (OSError when the address is taken), serve on a thread; returns the bound port."""
        import uvicorn

        from lanewatch.collector.common.serving import ServeLimits, uvicorn_config

        app = FastAPI(title="lanewatch probe span receiver", docs_url=None, redoc_url=None, openapi_url=None)
        app.add_api_route(
            TRACES_PATH, traces_endpoint(self._max_body_bytes, self._on_spans), methods=["POST"]
        )
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # Listening from here on: senders queue in the backlog even before the thread's loop accepts.
        self._sock = socket.create_server((self.host, self._requested_port), family=family, backlog=128)
        self.port = self._sock.getsockname()[1]
        config = uvicorn_config(app, ServeLimits(), log_level="warning", lifespan="off", access_log=False)
        server = uvicorn.Server(config)
        self._server = server
        sock = self._sock
        self._thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])), name="otlp-receiver", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        if not server.started:
            self.shutdown()
            raise OSError(f"the span receiver did not start on {self.host}:{self.port}")
        return self.port

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop serving and wait for the thread (uvicorn notices within ~0.1 s)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
