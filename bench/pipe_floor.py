"""The floor under any Python proxy here: a bare byte pipe on uvloop, the gateway's event loop.

Each client connection gets its own upstream connection, and every read goes to the other
side unchanged in the callback that read it: no HTTP parsing, no routing, no tap, no
record. What it costs per chunk is what uvloop and the two syscalls cost from Python; the
gateway's cost above it is its own Python. Not a proxy anyone should deploy (no timeouts,
no limits); `GET /health` on a fresh connection answers for the bench's start-up check.

Run alone: `python -m bench.pipe_floor --port 8002 --upstream http://127.0.0.1:8001`.
"""

from __future__ import annotations

import argparse
import asyncio
from urllib.parse import urlsplit

import uvloop

__all__ = ["serve"]

_HEALTH = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


class _Up(asyncio.Protocol):
    """The upstream side of one pipe: every read straight to the client."""

    def __init__(self, down: _Down) -> None:
        self.down = down

    def data_received(self, data: bytes) -> None:
        if self.down.transport is not None:
            self.down.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.down.transport is not None:
            self.down.transport.close()


class _Down(asyncio.Protocol):
    """The client side: connects upstream on the first request; bytes before that wait."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.transport: asyncio.Transport | None = None
        self.up: asyncio.Transport | None = None
        self.early: list[bytes] = []
        self.connecting = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.up is not None:
            self.up.write(data)
        elif data.startswith(b"GET /health ") and self.transport is not None:
            self.transport.write(_HEALTH)
        else:
            self.early.append(data)
            if not self.connecting:
                self.connecting = True
                asyncio.get_running_loop().create_task(self._connect())

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.up is not None:
            self.up.close()

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            up, _ = await loop.create_connection(lambda: _Up(self), self.host, self.port)
        except OSError:
            if self.transport is not None:
                self.transport.close()
            return
        self.up = up
        for data in self.early:
            up.write(data)
        self.early.clear()


async def serve(port: int, upstream: str) -> None:
    """Pipe 127.0.0.1:`port` to `upstream` (http://host:port) until cancelled."""
    url = urlsplit(upstream)
    host, up_port = url.hostname or "127.0.0.1", url.port or 80
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Down(host, up_port), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    """Parse the flags and run until interrupted."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True, help="http://host:port")
    args = ap.parse_args()
    uvloop.run(serve(args.port, args.upstream))


if __name__ == "__main__":
    main()
