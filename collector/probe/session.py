"""One probing session: N probes of one class against one target, each joined to its server span.

What `lanewatch probe` runs: the prober, the optional span receivers (OTLP/HTTP and OTLP/gRPC, each
on a thread of its own) and the join that holds each record until its span comes or its wait runs
out. The CLI parses flags, builds the tracer and prints; this module does the probing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Literal

from opentelemetry.trace import Tracer

from lanewatch.collector.collect.otlp_grpc import ThreadedGrpcReceiver, grpc_endpoint_url
from lanewatch.collector.collect.otlp_http import SpanReceiver, endpoint_url
from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.probe.join import LoopJoin, OrderedJoin
from lanewatch.collector.probe.prober import Prober, spec_for
from lanewatch.collector.probe.settings import RequestClass, Target, Timeouts
from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.timing import RequestTiming

__all__ = ["ListenError", "ProbeSession"]

Receiver = SpanReceiver | ThreadedGrpcReceiver


class ListenError(ConfigError):
    """A span receiver's address cannot be bound (taken, or not this machine's); `option` names its flag."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


class ProbeSession:
    """Probes one target with one class, one request at a time."""

    def __init__(
        self,
        target: Target,
        rclass: RequestClass,
        *,
        connection: Literal["warm", "cold"] = "warm",
        timeouts: Timeouts | None = None,
        tracer: Tracer | None = None,
        record_content: bool = False,
        join_wait_s: float = 6.0,
    ) -> None:
        self.target, self.rclass = target, rclass
        self._connection, self._timeouts, self._tracer = connection, timeouts, tracer
        self._record_content = record_content
        self._join_wait_s = join_wait_s

    async def run(
        self,
        count: int,
        interval: float,
        emit: Callable[[RequestTiming], None],
        *,
        listen: tuple[str, int] | None = None,
        grpc_listen: tuple[str, int] | None = None,
        say: Callable[[str], None] = print,
    ) -> list[RequestTiming]:
        """Send `count` probes `interval` s apart; each record goes to `emit` once joined or let go."""
        records: list[RequestTiming] = []

        def out(record: RequestTiming) -> None:
            records.append(record)
            emit(record)

        join = None
        receivers: list[Receiver] = []
        if listen is not None or grpc_listen is not None:
            join = LoopJoin(OrderedJoin(self._join_wait_s), out)
            try:
                receivers = await start_receivers(listen, grpc_listen, join.spans_from_thread, say)
            except ListenError:
                join.close()
                raise
        try:
            async with Prober(
                self.target,
                connection=self._connection,
                timeouts=self._timeouts,
                tracer=self._tracer,
                max_connections=1,
                record_content=self._record_content,
            ) as prober:
                for i in range(count):
                    if i and interval:
                        await asyncio.sleep(interval)
                    record = await prober.probe(spec_for(self.rclass, self.target, i))
                    if join is not None:
                        join.add_record(record)  # out when joined or its wait ran out; probing goes on
                    else:
                        out(record)
        finally:
            try:
                if join is not None:
                    await join.drain()  # at the end or on Ctrl-C: each held record waits out its join-wait
            finally:
                if join is not None:
                    join.close()  # a second Ctrl-C: what is still held goes out unjoined
                for receiver in receivers:
                    receiver.shutdown()  # not to_thread: it must run even while the task is being cancelled
        return records


async def start_receivers(
    listen: tuple[str, int] | None,
    grpc_listen: tuple[str, int] | None,
    sink: Callable[[list[ServerSpan]], None],
    say: Callable[[str], None],
) -> list[Receiver]:
    """Start the HTTP and/or gRPC span receivers, each on its own thread; say where vLLM should send."""
    started: list[Receiver] = []
    lines = []
    try:
        if listen is not None:
            http = SpanReceiver(*listen, sink)
            started.append(http)
            url = endpoint_url(http.host, await _bind(http, "--otlp-listen"))
            lines.append(
                f"lanewatch probe: receiving vLLM spans over OTLP/HTTP at {url}\n"
                "  run vLLM with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf "
                f"--otlp-traces-endpoint {url}"
            )
        if grpc_listen is not None:
            grpc = ThreadedGrpcReceiver(*grpc_listen, sink)
            started.append(grpc)
            url = grpc_endpoint_url(grpc.host, await _bind(grpc, "--otlp-grpc-listen"))
            lines.append(
                f"lanewatch probe: receiving vLLM spans over OTLP/gRPC at {url}\n"
                f"  run vLLM with --otlp-traces-endpoint {url} "
                "(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL unset or grpc)"
            )
    except ListenError:
        for receiver in started:
            receiver.shutdown()
        raise
    say("\n".join(lines))
    return started


async def _bind(receiver: Receiver, option: str) -> int:
    try:
        return await asyncio.to_thread(receiver.start)
    except OSError as exc:
        raise ListenError(option, f"cannot listen: {exc.strerror or exc}") from None
