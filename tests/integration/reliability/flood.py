"""An upstream that streams a large SSE body as fast as its socket takes it, on its own thread.

For back-pressure tests: `written` says how far it got, so a test can tell whether the proxy in
front of it stopped reading (the flood blocks) or buffered everything (the flood ran through).
Each event is a valid chat chunk of about 1 KiB; `GET /health` answers 200.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

FRAME = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"x" * 960 + b'"}}]}\n\n'
DONE = b"data: [DONE]\n\n"


class Flood:
    """The flood server's counters, read from the test thread."""

    def __init__(self, frames: int) -> None:
        self.frames = frames
        self.written = 0  # bytes of body handed to the socket so far
        self.finished = 0  # streams written to the end
        self.broken = 0  # streams whose reader went away
        self.url = ""

    @property
    def body_bytes(self) -> int:
        """Bytes of one whole response body."""
        return self.frames * len(FRAME) + len(DONE)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection: /health, or one flood (close-delimited, so no length to know)."""
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
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            batch = FRAME * 64
            for _ in range(self.frames // 64):
                writer.write(batch)
                self.written += len(batch)
                await writer.drain()
            writer.write(DONE)
            await writer.drain()
            self.finished += 1
        except (ConnectionError, asyncio.IncompleteReadError):
            self.broken += 1
        finally:
            writer.close()


@contextmanager
def flood_upstream(frames: int) -> Iterator[Flood]:
    """Serve a flood of `frames` events (a multiple of 64) on 127.0.0.1 until the block exits."""
    flood = Flood(frames)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(asyncio.start_server(flood.handle, "127.0.0.1", 0), loop)
    srv = server.result(10)
    flood.url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    try:
        yield flood
    finally:

        async def close() -> None:
            srv.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
