"""A hostile OpenAI upstream on 127.0.0.1, run as its own process so its CPU is not the test's.

Modes, one per process: `interim` answers every POST with 100 Continue heads, written as fast
as the socket takes them, and never a final head; `event` answers 200 with an event stream
whose one event is `--lines` `data:` lines of 1 MiB and no blank line. Either way it stops
when the client goes away or after `--limit-s` seconds. `GET` answers 200 (a health check).

Run: `python -m tests.hostile_upstream --port 8001 --mode interim`.
"""

from __future__ import annotations

import argparse
import asyncio
import time

INTERIM = b"HTTP/1.1 100 Continue\r\n\r\n" * 2048
EVENT_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
LINE = b"data: " + b"x" * (1024 * 1024) + b"\n"


class Hostile:
    """Serves one mode on every connection."""

    def __init__(self, mode: str, lines: int, limit_s: float) -> None:
        self.mode, self.lines, self.limit_s = mode, lines, limit_s

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read one request, then answer it with this server's attack."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if head.startswith(b"GET"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            await (self._interim(writer) if self.mode == "interim" else self._event(writer))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _interim(self, writer: asyncio.StreamWriter) -> None:
        stop = time.monotonic() + self.limit_s
        while time.monotonic() < stop and not writer.is_closing():
            writer.write(INTERIM)
            await writer.drain()

    async def _event(self, writer: asyncio.StreamWriter) -> None:
        stop = time.monotonic() + self.limit_s
        writer.write(EVENT_HEAD)
        for _ in range(self.lines):
            if time.monotonic() > stop or writer.is_closing():
                return
            writer.write(LINE)
            await writer.drain()


async def _serve(port: int, hostile: Hostile) -> None:
    server = await asyncio.start_server(hostile.handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    """Serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=("interim", "event"), required=True)
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--limit-s", type=float, default=60.0)
    args = parser.parse_args()
    asyncio.run(_serve(args.port, Hostile(args.mode, args.lines, args.limit_s)))


if __name__ == "__main__":
    main()
