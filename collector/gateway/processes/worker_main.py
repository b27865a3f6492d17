"""One worker process of `lanewatch gateway --workers N`, started by the supervisor as
`python -m lanewatch.collector.gateway.processes.worker_main FD`.

FD is its end of the socket pair to the supervisor (control_channel.py). It asks the supervisor for
its settings and the degrade state, builds the gateway as a single process would, listens on
the shared port (SO_REUSEPORT), says it is ready, and serves until SIGTERM or SIGINT, or until
the supervisor is gone; then it drains (`gateway.drain_timeout_s`) and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import sys
from pathlib import Path

from lanewatch.collector.collect.settings import ExportConfig
from lanewatch.collector.common import eventloop
from lanewatch.collector.gateway.settings import GatewayConfig

from ..server import GatewayServer
from .control_channel import Link, LinkClosed, Message
from .per_worker import SharedDegrade, export_share, records_path, worker_routes
from .serve import Built, build_gateway

__all__ = ["main"]

log = logging.getLogger("lanewatch.gateway")
HELLO_TIMEOUT_S = 30.0


def main(argv: list[str] | None = None) -> None:
    """Run one worker on the socket pair end named by the first argument."""
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # until the loop's handlers are in place
    sys.exit(eventloop.run(_worker(int(args[0]))))


async def _worker(fd: int) -> int:
    shared = SharedDegrade()

    async def answer(message: Message) -> Message:
        if message.get("op") == "state":
            shared.take(message)
            return {}
        if message.get("op") == "render" and shared.gw is not None and shared.gw.metrics_text is not None:
            body, _ = await asyncio.to_thread(shared.gw.metrics_text)
            return {"text": body.decode()}
        return {"error": f"unknown op {message.get('op')!r}"}

    link = await Link.over(socket.socket(fileno=fd), answer)
    try:
        init = await link.ask({"op": "hello"}, HELLO_TIMEOUT_S)
    except LinkClosed:
        return 1
    shared.take(init["state"])
    try:
        server, built = await _start(init, shared, link)
    except Exception as exc:  # one line for the supervisor to report; the trace is of no use to users
        message = str(exc) or type(exc).__name__
        with contextlib.suppress(LinkClosed):
            await link.ask({"op": "failed", "error": message}, 5.0)
        return 1
    gc.freeze()  # as in a single process: what lives as long as the process stays out of collections
    await _until_stopped(link)
    await server.shutdown(server.gw.cfg.drain_timeout_s)
    built.close_records()
    link.close()
    return 0


async def _start(init: Message, shared: SharedDegrade, link: Link) -> tuple[GatewayServer, Built]:
    cfg = GatewayConfig.model_validate(init["config"])
    count, slot = int(init["count"]), int(init["slot"])
    export = export_share(ExportConfig.model_validate(init["export"]), count)
    records = init.get("records")
    built = build_gateway(cfg, export, records_path(Path(records) if records else None, slot, count))
    shared.attach(built.gateway)
    server = GatewayServer(built.gateway, worker_routes(built.gateway, link))
    try:
        await server.start(cfg.server.host, int(init["port"]), reuse_port=True)
    except OSError as exc:
        await server.shutdown()
        built.close_records()
        raise OSError(f"cannot listen on {cfg.server.host}:{init['port']}: {exc.strerror or exc}") from None
    await link.ask({"op": "ready"}, HELLO_TIMEOUT_S)
    return server, built


async def _until_stopped(link: Link) -> None:
    """Until SIGTERM or SIGINT, or the supervisor is gone."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    gone = asyncio.create_task(link.closed.wait())
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({gone, stopped}, return_when=asyncio.FIRST_COMPLETED)
    for task in (gone, stopped):
        task.cancel()


if __name__ == "__main__":
    main()
