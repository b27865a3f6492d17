"""A tiny raw-asyncio HTTP/1.1 server on 127.0.0.1 that plays scripted SSE replies.

It records what it received and when it wrote each part (perf_counter, same process as
the prober under test), so tests can compare the prober's times with the truth.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Reply:
    """One scripted response: (delay before, bytes) parts, then how the stream ends."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/event-stream"})
    parts: list[tuple[float, bytes]] = field(default_factory=list)
    end: Literal["normal", "close", "reset", "hang"] = "normal"
    before_headers: Literal["send", "reset", "close"] = "send"


@dataclass
class Received:
    """A request as the server saw it, with write times of each reply part."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    connection: int
    arrived: float
    written: list[float] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data


Handler = Callable[[Received], Reply]


def sse(obj: object) -> bytes:
    """One SSE frame."""
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def chat_chunk(content: str | None = None, role: str | None = None, finish: str | None = None) -> bytes:
    delta: dict[str, str] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return sse({"id": "chatcmpl-t", "object": "chat.completion.chunk", "model": "m", "choices": [choice]})


def usage_chunk(prompt: int, completion: int) -> bytes:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return sse({"id": "chatcmpl-t", "object": "chat.completion.chunk", "choices": [], "usage": usage})


def chat_stream(
    tokens: int, *, first_delay: float = 0.0, gap: float = 0.0, usage: bool = True, done: bool = True
) -> list[tuple[float, bytes]]:
    """A vLLM-shaped chat stream: role chunk, `tokens` content chunks, usage, [DONE]."""
    parts = [(0.0, chat_chunk("", role="assistant"))]
    for i in range(tokens):
        parts.append((first_delay if i == 0 else gap, chat_chunk(f"t{i} ")))
    parts.append((0.0, chat_chunk("", finish="length")))
    if usage:
        parts.append((0.0, usage_chunk(7, tokens)))
    if done:
        parts.append((0.0, b"data: [DONE]\n\n"))
    return parts


class ScriptedServer:
    """Serves `handler`'s replies over HTTP/1.1 (keep-alive, chunked), optionally TLS."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.received: list[Received] = []
        self.connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def url(self, host: str = "127.0.0.1") -> str:
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        conn = self.connections
        try:
            while await self._one(reader, writer, conn):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, asyncio.CancelledError):
            pass  # the client went away, or the server is stopping: end quietly
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: int) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        arrived = time.perf_counter()
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ln)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        req = Received(method, path, headers, body, conn, arrived)
        self.received.append(req)
        reply = self.handler(req)
        if reply.before_headers != "send":
            _abort(writer, reset=reply.before_headers == "reset")
            return False
        hdrs = {
            **reply.headers,
            "transfer-encoding": "chunked",
            "x-request-id": headers.get("x-request-id", "gen"),
        }
        text = "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
        writer.write(f"HTTP/1.1 {reply.status} X\r\n{text}\r\n".encode("latin-1"))
        await writer.drain()
        for delay, data in reply.parts:
            if delay:
                await asyncio.sleep(delay)
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
            req.written.append(time.perf_counter())
        if reply.end == "hang":
            await asyncio.sleep(3600)
        if reply.end != "normal":
            _abort(writer, reset=reply.end == "reset")
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _abort(writer: asyncio.StreamWriter, reset: bool) -> None:
    if reset:  # SO_LINGER 0: the close sends RST
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()


@dataclass(frozen=True)
class Certs:
    ca: Path
    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.cert, self.key)
        return ctx


def make_certs(directory: Path, names: tuple[str, ...] = ("localhost",)) -> Certs:
    """A CA and a server certificate for `names` and 127.0.0.1, signed by it."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lanewatch test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = Certs(directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    paths.ca.write_bytes(ca.public_bytes(pem))
    paths.cert.write_bytes(cert.public_bytes(pem))
    paths.key.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths
