"""The channel between the gateway's supervisor and one worker: JSON messages on a socket pair.

Each message is one frame, a 4-byte big-endian length and that many bytes of a JSON object.
Either side may ask (a message with an `id` and an `op`) and either side answers (a message
with `re`, the asked `id`), so a worker can ask for a merged /metrics page while the
supervisor asks it for its own. Questions are answered in tasks of their own, in any order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from lanewatch.collector.common.errors import UpstreamError

__all__ = ["Link", "LinkClosed", "Message"]

log = logging.getLogger("lanewatch.gateway.workers")
Message = dict[str, Any]
Answer = Callable[[Message], Awaitable[Message]]
MAX_FRAME = 256 * 1024 * 1024  # a merged /metrics page at the full series budget is a few MiB
_LENGTH = struct.Struct(">I")


class LinkClosed(UpstreamError, ConnectionError):
    """The other side is gone (or never answered in time)."""


class Link:
    """One end of the channel: `ask` sends a question and waits for its answer; `answer` is
    called with each question that arrives and gives what is sent back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: Answer) -> None:
        self._reader, self._writer, self._answer = reader, writer, answer
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._next = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._reading = asyncio.get_running_loop().create_task(self._read())
        self.closed = asyncio.Event()

    @classmethod
    async def over(cls, sock: socket.socket, answer: Answer) -> Link:
        """A link over one end of a connected socket pair."""
        reader, writer = await asyncio.open_connection(sock=sock, limit=2**20)
        return cls(reader, writer, answer)

    async def ask(self, message: Message, timeout_s: float) -> Message:
        """Send a question; its answer, or LinkClosed when the other side is gone or late."""
        if self.closed.is_set():
            raise LinkClosed("the other side is gone")
        self._next += 1
        ident = self._next
        waiter = asyncio.get_running_loop().create_future()
        self._pending[ident] = waiter
        try:
            self._send({**message, "id": ident})
            async with asyncio.timeout(timeout_s):
                answer: Message = await waiter
                return answer
        except TimeoutError:
            raise LinkClosed(f"no answer to {message.get('op')!r} within {timeout_s:g} s") from None
        finally:
            self._pending.pop(ident, None)

    def close(self) -> None:
        """Close the socket; questions waiting get LinkClosed."""
        self._reading.cancel()
        self._gone()

    def _send(self, message: Message) -> None:
        body = json.dumps(message, separators=(",", ":")).encode()
        try:
            self._writer.write(_LENGTH.pack(len(body)) + body)
        except (OSError, RuntimeError) as exc:
            self._gone()
            raise LinkClosed(str(exc)) from None

    async def _read(self) -> None:
        try:
            while True:
                (size,) = _LENGTH.unpack(await self._reader.readexactly(_LENGTH.size))
                if size > MAX_FRAME:
                    log.error("control frame of %d bytes refused; closing the channel", size)
                    return
                self._receive(json.loads(await self._reader.readexactly(size)))
        except (asyncio.IncompleteReadError, OSError, ValueError):
            return
        finally:
            self._gone()

    def _receive(self, message: Message) -> None:
        if "re" in message:
            waiter = self._pending.get(message["re"])
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
            return
        task = asyncio.get_running_loop().create_task(self._reply(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reply(self, message: Message) -> None:
        try:
            answer = await self._answer(message)
        except Exception as exc:  # a bug answering must not leave the asker waiting
            log.exception("answering %r failed", message.get("op"))
            answer = {"error": str(exc)}
        with contextlib.suppress(LinkClosed):
            self._send({**answer, "re": message.get("id")})

    def _gone(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(LinkClosed("the other side is gone"))
        self._writer.close()
