"""`lanewatch collect` as a process: the HTTP app and the OTLP/gRPC receiver on their sockets, the
service's loops beside them, until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.config import LanewatchConfig, ingest_auth_problem

if TYPE_CHECKING:
    from lanewatch.collector.collect.otlp_grpc import GrpcSpanReceiver

__all__ = ["listen_socket", "run_until_signalled", "serve", "start_grpc_receiver"]


async def serve(
    service: CollectorService, host: str, port: int, stop: asyncio.Event, on_listening: Callable[[int], None]
) -> None:
    """Serve the HTTP app and run the service until `stop`; `on_listening` gets the bound port."""
    import uvicorn

    from lanewatch.collector.common.serving import limits_of, uvicorn_config

    problem = ingest_auth_problem(service.cfg, host, not service.ingest_auth.open)
    if problem is not None:  # where the address is decided: refused before anything listens
        raise ConfigError(problem)
    limits = limits_of(service.cfg.server)
    config = uvicorn_config(service.app(), limits, host=host, port=port, log_level="warning", lifespan="off")
    sock = listen_socket(host, port)  # bound before anything runs: a taken port fails here, clearly
    try:
        grpc_receiver = await start_grpc_receiver(service)
    except OSError:
        sock.close()
        raise
    on_listening(sock.getsockname()[1])
    server = uvicorn.Server(config)
    server_task = asyncio.create_task(server.serve(sockets=[sock]), name="http")
    run_task = asyncio.create_task(service.run(stop), name="collector")
    try:
        await stop.wait()
    finally:
        stop.set()
        await asyncio.gather(run_task, return_exceptions=True)  # still receiving spans while it drains
        server.should_exit = True
        await asyncio.gather(server_task, return_exceptions=True)
        sock.close()
        if grpc_receiver is not None:
            await grpc_receiver.shutdown()


async def start_grpc_receiver(service: CollectorService) -> GrpcSpanReceiver | None:
    """The OTLP/gRPC receiver on this loop when `otlp.grpc_listen` is set (OSError when it cannot bind)."""
    otlp = service.cfg.otlp
    if not (otlp.enabled and otlp.grpc_listen):
        return None
    from lanewatch.collector.collect.otlp_grpc import GrpcLimits, GrpcSpanReceiver
    from lanewatch.collector.common.validation import parse_listen

    limits = GrpcLimits(
        max_message_bytes=otlp.max_body_bytes,
        max_spans=otlp.max_spans_per_request,
        max_log_records=otlp.max_log_records_per_request,
        default_class=otlp.envoy_default_class,
        max_concurrent=otlp.grpc_max_concurrent,
        streams_per_connection=otlp.grpc_streams_per_connection,
        read_timeout_s=otlp.grpc_read_timeout_s,
        max_connection_age_s=otlp.grpc_max_connection_age_s,
    )
    receiver = GrpcSpanReceiver(
        *parse_listen(otlp.grpc_listen),
        service.receive_spans,
        token=service.ingest_auth,
        on_refused=service.count_refused,
        limits=limits,
        on_logs=service.receive_logs if otlp.logs else None,
    )
    service.grpc_port = await receiver.start()
    return receiver


async def run_until_signalled(cfg: LanewatchConfig, announce: Callable[[str], None]) -> None:
    """`lanewatch collect`: serve and run the service until SIGINT or SIGTERM; `announce` gets the
    line saying where it listens. OSError for a taken port, SecretError for an unreadable token file."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    service = CollectorService.from_config(cfg)
    paths = ["/metrics", "/healthz"]
    paths += ["/v1/traces"] if cfg.otlp.enabled else []
    paths += ["/v1/logs"] if cfg.otlp.enabled and cfg.otlp.logs else []
    paths += ["/v1/records"] if cfg.ingest.enabled else []

    def listening(bound: int) -> None:
        announce(
            f"http://{cfg.server.host}:{bound} ({', '.join(paths)}); "
            f"{len(cfg.targets)} targets, {len(service.scrape_targets)} scraped"
        )

        if service.grpc_port is not None and cfg.otlp.grpc_listen is not None:
            from lanewatch.collector.collect.otlp_grpc import grpc_endpoint_url
            from lanewatch.collector.common.validation import parse_listen

            url = grpc_endpoint_url(parse_listen(cfg.otlp.grpc_listen)[0], service.grpc_port)
            announce(f"OTLP/gRPC spans at {url}")

    await serve(service, cfg.server.host, cfg.server.port, stop, listening)


def listen_socket(host: str, port: int) -> socket.socket:
    """A bound TCP socket (OSError when the address is taken or unknown)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
