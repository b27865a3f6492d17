"""A light upstream for many targets: one process listening on many 127.0.0.1 ports.

Each port answers what a vLLM server answers the collector: streamed chat completions
(bench/sse_light.py's timing: headers at once, the first chunk 50 ms after the request,
then one every 10 ms, usage and `[DONE]`) and `GET /metrics` with a captured vLLM page
(tests/fixtures/sim-fast-metrics.txt, 445 lines). It binds `--count` ports chosen by the
kernel and writes them, as a JSON list, to `--ports-file` once every one listens.

Run alone: `python -m bench.fleet_upstream --count 1000 --ports-file /tmp/ports.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
from pathlib import Path

from .sse_light import SseLight, add_timing_args

__all__ = ["METRICS_PAGE", "MetricsAndSse", "serve_many"]

METRICS_PAGE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "sim-fast-metrics.txt"


def _metrics_answer(page: bytes) -> bytes:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
        b"Content-Length: %d\r\n\r\n" % len(page)
    )
    return head + page


class MetricsAndSse(SseLight):
    """SseLight that also serves `GET /metrics`."""

    def __init__(self, metrics: bytes, first_s: float, gap_s: float, chunks: int) -> None:
        super().__init__(first_s, gap_s, chunks)
        self.metrics = metrics

    def _answer(self, head: bytes, body: bytes) -> None:
        if head.startswith(b"GET /metrics") and self.transport is not None:
            self.transport.write(self.metrics)
            return
        super()._answer(head, body)


async def serve_many(count: int, first_ms: float, gap_ms: float, chunks: int) -> list[asyncio.Server]:
    """Listen on `count` kernel-chosen 127.0.0.1 ports, all on the current loop."""
    loop = asyncio.get_running_loop()
    answer = _metrics_answer(METRICS_PAGE.read_bytes())
    servers = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        server = await loop.create_server(
            lambda: MetricsAndSse(answer, first_ms / 1000, gap_ms / 1000, chunks), sock=sock, backlog=64
        )
        servers.append(server)
    return servers


async def _main(args: argparse.Namespace) -> None:
    servers = await serve_many(args.count, args.first_ms, args.gap_ms, args.chunks)
    ports = [s.sockets[0].getsockname()[1] for s in servers]
    tmp = args.ports_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(ports))
    tmp.replace(args.ports_file)  # the reader never sees half a list
    await asyncio.Event().wait()


def main() -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--ports-file", type=Path, required=True)
    add_timing_args(parser)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args))


if __name__ == "__main__":
    main()
