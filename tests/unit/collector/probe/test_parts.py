"""Pure parts of the prober: request bodies, prompts, error classification, timed connections."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time

import pytest

from lanewatch.collector.http1.client import UpstreamGone
from lanewatch.collector.http1.message import HttpError
from lanewatch.collector.probe.errors import failure_kind
from lanewatch.collector.probe.prober import ProbeSpec, spec_for
from lanewatch.collector.probe.prompts import prompt_text
from lanewatch.collector.probe.settings import DEFAULT_CLASSES, RequestClass, Target
from lanewatch.collector.probe.transport import ConnectTimes, DnsError, ProbeConnections
from lanewatch.collector.record.timing import ErrorKind

TARGET = Target(name="t", url="http://x", model="m")


def test_chat_and_completions_bodies() -> None:
    chat = json.loads(ProbeSpec("c", "chat", 16, True, "hi").body("m"))
    assert chat == {
        "model": "m", "max_tokens": 16, "stream": True, "stream_options": {"include_usage": True},
        "ignore_eos": True, "messages": [{"role": "user", "content": "hi"}],
    }  # fmt: skip
    comp = json.loads(ProbeSpec("c", "completions", 4, False, "hi").body("m"))
    assert comp["prompt"] == "hi" and "ignore_eos" not in comp and "messages" not in comp


def test_prompt_text_is_never_in_the_spec_repr() -> None:
    assert "hunter2" not in repr(ProbeSpec("c", "chat", 1, prompt="hunter2"))


def test_spec_takes_the_class_api_only_when_the_class_names_one() -> None:
    completions_target = Target(name="t", url="http://x", model="m", api="completions")
    assert spec_for(RequestClass(name="a"), completions_target).api == "completions"
    assert spec_for(RequestClass(name="a", api="chat"), completions_target).api == "chat"
    short = spec_for(DEFAULT_CLASSES[0], TARGET)
    assert (short.max_tokens, short.ignore_eos) == (16, True)


def test_prompts_are_deterministic_sized_and_unique_per_probe() -> None:
    summary = next(c for c in DEFAULT_CLASSES if c.name == "summary")
    a, b = prompt_text(summary, 1), prompt_text(summary, 2)
    assert a == prompt_text(summary, 1)
    assert a != b and a.split(". ", 1)[1] == b.split(". ", 1)[1]  # only the lead differs
    assert len(a.split()) >= summary.prompt_words
    exact = RequestClass(name="x", prompt="exactly this")
    assert prompt_text(exact, 5) == "exactly this"


def _chain(outer: type[Exception], inner: BaseException) -> Exception:
    try:
        try:
            raise inner
        except BaseException as e:
            raise outer("wrapped") from e
    except Exception as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "phase", "kind"),
    [
        (DnsError("nope"), "connect", ErrorKind.DNS),
        (ConnectionRefusedError(), "connect", ErrorKind.CONNECT_REFUSED),
        (_chain(OSError, ConnectionRefusedError()), "connect", ErrorKind.CONNECT_REFUSED),
        (OSError("unreachable"), "connect",  ErrorKind.CONNECT),
        (ExceptionGroup("all", [ConnectionRefusedError(), OSError()]), "connect", ErrorKind.CONNECT_REFUSED),
        (TimeoutError(), "connect", ErrorKind.CONNECT_TIMEOUT),
        (TimeoutError(), "pool", ErrorKind.CONNECT_TIMEOUT),
        (ssl.SSLCertVerificationError("bad cert"), "tls", ErrorKind.TLS),
        (TimeoutError(), "tls", ErrorKind.TLS),
        (BrokenPipeError(), "send", ErrorKind.SEND),
        (UpstreamGone("closed", fresh=True), "wait", ErrorKind.CONNECT),
        (HttpError("bad chunk size"), "body", ErrorKind.BAD_STREAM),
        (HttpError("bad Content-Length '-1'"), "wait", ErrorKind.BAD_STREAM),
        (_chain(OSError, HttpError("head")), "wait", ErrorKind.BAD_STREAM),
        (UpstreamGone("reset", fresh=False), "body", ErrorKind.TRUNCATED),
        (TimeoutError(), "body", ErrorKind.STALL),
        (ValueError("?"), "pool", ErrorKind.OTHER),
    ],
)  # fmt: skip
def test_failure_kinds(exc: BaseException, phase: str, kind: ErrorKind) -> None:
    assert failure_kind(exc, phase) is kind


class FakeConnect:
    """Refuses some addresses; connects the others (after 10 ms) to one end of a socket pair."""

    def __init__(self, refuse: set[str]) -> None:
        self.refuse = refuse
        self.tried: list[str] = []
        self.peers: list[socket.socket] = []

    async def __call__(self, address: str, port: int) -> socket.socket:
        self.tried.append(address)
        if address in self.refuse:
            raise ConnectionRefusedError(111, "refused")
        await asyncio.sleep(0.01)
        ours, theirs = socket.socketpair()
        self.peers.append(theirs)
        return ours


async def test_connections_time_dns_apart_and_try_each_address() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        await asyncio.sleep(0.02)
        return ["::1", "127.0.0.1"]

    connect = FakeConnect(refuse={"::1"})
    conns = ProbeConnections("example.test", 80, None, resolve=resolve, connect=connect)
    times = ConnectTimes()
    started = time.perf_counter()
    conn = await conns.open(times)
    elapsed = time.perf_counter() - started
    conn.abort()
    assert connect.tried == ["::1", "127.0.0.1"]
    assert times.address == "127.0.0.1" and times.phase == "ready"
    # At least the 20 ms lookup and the 10 ms connect, each apart, and together no more than
    # the call took (a fixed upper bound is what a slow host breaks).
    assert times.dns_s > 0.015 and times.connect_s > 0.008
    assert times.dns_s + times.connect_s <= elapsed


async def test_connections_skip_dns_for_literal_addresses() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        raise AssertionError("must not resolve a literal")

    times = ConnectTimes()
    conn = await ProbeConnections("127.0.0.1", 80, None, resolve=resolve, connect=FakeConnect(set())).open(
        times
    )
    conn.abort()
    assert times.dns_s == 0.0 and times.connect_s > 0


async def test_resolution_failure_and_timeout_are_dns_errors() -> None:
    async def fail(host: str, port: int) -> list[str]:
        raise OSError(-2, "Name or service not known")

    async def hang(host: str, port: int) -> list[str]:
        await asyncio.sleep(10)
        return []

    with pytest.raises(DnsError):
        await ProbeConnections("x.invalid", 80, None, resolve=fail).open(ConnectTimes())
    times = ConnectTimes()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await ProbeConnections("x.invalid", 80, None, resolve=hang).open(times)
    assert failure_kind(TimeoutError(), "connect", times.resolving) is ErrorKind.DNS
