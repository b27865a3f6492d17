"""A malformed response is `bad_stream` with its reason, the same from the prober and the gateway."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest

from lanewatch.collector.probe.prober import Prober, ProbeSpec
from lanewatch.collector.probe.settings import Target, Timeouts
from lanewatch.collector.record.timing import ErrorKind, RequestTiming

from .gateway_harness import chat_body, eventually, gateway_server

pytestmark = pytest.mark.integration

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
CHUNKED = SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
FRAME = b"data: {}\n\n"
FAST = Timeouts(connect_s=2.0, ttft_s=5.0, stall_s=5.0, total_s=10.0)


class Hostile:
    """Answers each request with `reply`, then `repeat` until the client gives up; then closes, or not."""

    def __init__(self, reply: bytes, repeat: bytes = b"", close: bool = True) -> None:
        self.reply, self.repeat, self.close = reply, repeat, close

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            match = re.search(rb"(?i)\r\ncontent-length: *([0-9]+)", head)
            await reader.readexactly(int(match[1]) if match else 0)
            writer.write(self.reply)
            await writer.drain()
            for _ in range(100_000 if self.repeat else 0):  # bounded, though the client stops it far sooner
                writer.write(self.repeat)
                await writer.drain()
            if not self.close:
                await reader.read()  # until the client closes
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def hostile(up: Hostile) -> AsyncIterator[str]:
    server = await asyncio.start_server(up.serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


async def probe(url: str) -> RequestTiming:
    async with Prober(Target(name="t", url=url, model="m"), timeouts=FAST) as p:
        return await p.probe(ProbeSpec("short", "chat", max_tokens=4))


async def through_gateway(url: str) -> RequestTiming:
    async with gateway_server({"slow": [url]}, read_timeout_s=5.0) as g, aiohttp.ClientSession() as s:
        async with s.post(f"{g.url}/v1/chat/completions", json=chat_body()) as resp:
            await resp.read()
        assert await eventually(lambda: bool(g.records))
        return g.records[0]


CASES = {
    "negative content-length": (Hostile(SSE_HEAD + b"Content-Length: -5\r\n\r\n"), "Content-Length"),
    "endless headers": (Hostile(SSE_HEAD, repeat=b"x-pad: " + b"a" * 1000 + b"\r\n"), "larger than 64 KiB"),
    "no blank line": (Hostile(SSE_HEAD + b"Content-Length: 10\r\n"), "inside the response head"),
    "17-digit chunk size": (Hostile(CHUNKED + b"00000000000000001\r\nx\r\n"), "bad chunk size"),
    "endless interim heads": (Hostile(b"", repeat=b"HTTP/1.1 100 Continue\r\n\r\n", close=False), "interim"),
    "bad status line": (Hostile(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"), "bad status line"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_malformed_response_is_bad_stream_with_its_reason_in_the_prober_and_the_gateway(
    case: str,
) -> None:
    up, reason = CASES[case]
    async with hostile(up) as url:
        probed = await probe(url)
        tapped = await through_gateway(url)
    for record in (probed, tapped):
        assert record.error is ErrorKind.BAD_STREAM, (record.source, record.error)
        assert record.error_message is not None and reason in record.error_message, record.error_message


async def test_an_endless_event_ends_the_probe_as_bad_stream_after_a_bounded_read() -> None:
    line = b"data: " + b"x" * (1024 * 1024) + b"\n"
    up = Hostile(CHUNKED, repeat=b"%x\r\n%b\r\n" % (len(line), line))  # 1 MiB lines, no blank one
    async with hostile(up) as url:
        record = await probe(url)
    assert record.error is ErrorKind.BAD_STREAM and record.status == 200
    assert record.error_message == "an SSE event longer than 4 MiB"
