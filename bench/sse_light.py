"""A light SSE upstream with fixed timing: the same for every path the tap bench compares.

Per request: response headers at once, the first content chunk `first_ms` after the request
arrived, then one every `gap_ms` (on an absolute schedule, so a late tick does not shift the
rest), `chunks` in all (`max_tokens` in the body overrides it), then the usage event when
the body asked for it (`"include_usage":true`), `data: [DONE]` and the end of the chunked
body. Each content event carries, in its `created` field, `time.monotonic_ns() // 1000` at
the moment it was written: the client on the same machine (same clock) subtracts it from
its own arrival time to get each chunk's one-way delay.

Why not the simulator: `lanewatch sim` spends ~26 µs of Python per chunk (engine steps,
JSON, aiohttp's writer) on the same two cores as the proxy being measured; this upstream
spends a few (one timer callback and one formatted write per chunk), so the proxies' own
cost is what moves the figures. It is plain asyncio: HTTP/1.1 keep-alive, one request at a
time per connection, `GET /health`.

Run alone: `python -m bench.sse_light --port 8001 [--first-ms 50 --gap-ms 10 --chunks 41]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import time

__all__ = ["SseLight", "add_timing_args", "serve"]

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
_HEALTH = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
_EVENT = (
    b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":%d,"model":"bench",'
    b'"choices":[{"index":0,"delta":{"content":"t%d "},"logprobs":null,"finish_reason":null}]}\n\n'
)
_USAGE = (
    b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","model":"bench","choices":[],'
    b'"usage":{"prompt_tokens":7,"total_tokens":%d,"completion_tokens":%d}}\n\n'
)
_DONE = b"data: [DONE]\n\n"
_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)
_MAX_TOKENS = re.compile(rb'"max_tokens":\s*(\d+)')


def _frame(payload: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(payload), payload)


class SseLight(asyncio.Protocol):
    """One client connection; streams one response at a time off the event loop's timers."""

    def __init__(self, first_s: float, gap_s: float, chunks: int) -> None:
        self.first_s, self.gap_s, self.chunks = first_s, gap_s, chunks
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.timer: asyncio.TimerHandle | None = None
        self.streaming = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while not self.streaming:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            m = _LENGTH.search(self.buf, 0, end + 2)
            length = int(m.group(1)) if m else 0
            if len(self.buf) < end + 4 + length:
                return
            head, body = self.buf[:end], self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            self._answer(head, body)

    def _answer(self, head: bytes, body: bytes) -> None:
        assert self.transport is not None
        if head.startswith(b"GET /health"):
            self.transport.write(_HEALTH)
            return
        if not head.startswith(b"POST "):
            self.transport.write(_NOT_FOUND)
            return
        loop = asyncio.get_running_loop()
        m = _MAX_TOKENS.search(body)
        n = int(m.group(1)) if m else self.chunks
        usage = b'"include_usage":true' in body
        self.transport.write(_HEAD)
        self.streaming = True
        start = loop.time()
        self.timer = loop.call_at(start + self.first_s, self._tick, loop, start, 0, n, usage)

    def _tick(self, loop: asyncio.AbstractEventLoop, start: float, i: int, n: int, usage: bool) -> None:
        t = self.transport
        if t is None or t.is_closing():
            return
        out = _frame(_EVENT % (time.monotonic_ns() // 1000, i))
        i += 1
        if i < n:
            t.write(out)
            self.timer = loop.call_at(
                start + self.first_s + i * self.gap_s, self._tick, loop, start, i, n, usage
            )
            return
        if usage:
            out += _frame(_USAGE % (7 + n, n))
        t.write(out + _frame(_DONE) + b"0\r\n\r\n")
        self.timer, self.streaming = None, False
        if self.buf:
            self.data_received(b"")


async def serve(host: str, port: int, first_ms: float, gap_ms: float, chunks: int) -> asyncio.Server:
    """Listen on (host, port); the server runs on the current loop."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: SseLight(first_ms / 1000, gap_ms / 1000, chunks), host, port, backlog=4096
    )


async def _main(args: argparse.Namespace) -> None:
    server = await serve(args.host, args.port, args.first_ms, args.gap_ms, args.chunks)
    async with server:
        await server.serve_forever()


def add_timing_args(parser: argparse.ArgumentParser) -> None:
    """The answer's timing flags: --first-ms, --gap-ms, --chunks."""
    parser.add_argument("--first-ms", type=float, default=50.0)
    parser.add_argument("--gap-ms", type=float, default=10.0)
    parser.add_argument("--chunks", type=int, default=41)


def main() -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    add_timing_args(parser)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args))


if __name__ == "__main__":
    main()
