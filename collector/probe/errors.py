"""Which `ErrorKind` a failed probe gets, from the exception and the phase it failed in.

Pure: the prober tracks the phase it is in and hands over the exception; the cause chain
(`raise ... from`, exception groups) says what the OS saw.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator

from lanewatch.collector.http1.message import HttpError
from lanewatch.collector.openai_api.error_detail import clean
from lanewatch.collector.probe.transport import DnsError
from lanewatch.collector.record.timing import ErrorKind


def causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception, its causes and contexts, and the members of exception groups."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)


def failure_kind(exc: BaseException, phase: str, resolving: bool = False) -> ErrorKind:
    """The error kind of a probe that raised `exc` while in `phase`.

    Phases: pool (before a connection), connect (DNS + TCP), tls, send (writing the
    request), wait (request sent, no response headers yet), body (streaming). A response
    that breaks HTTP/1.1 (`HttpError`) is `bad_stream` in any phase.
    """
    chain = list(causes(exc))
    if resolving or any(isinstance(e, DnsError) for e in chain):
        return ErrorKind.DNS
    if any(isinstance(e, HttpError) for e in chain):
        # A malformed response (a bad head, a bad chunk): the gateway names it the same way.
        return ErrorKind.BAD_STREAM
    if phase in ("pool", "connect"):
        return _connect_kind(chain)
    if phase == "tls" or any(isinstance(e, ssl.SSLError) for e in chain):
        return ErrorKind.TLS
    if phase == "send":
        return ErrorKind.SEND
    if phase == "wait":
        # The request went out and the connection dropped before any response: a
        # TCP-level failure (reset or close by the server), not a malformed stream.
        return ErrorKind.CONNECT
    if phase == "body":
        if any(isinstance(e, TimeoutError) for e in chain):
            return ErrorKind.STALL
        return ErrorKind.TRUNCATED  # the stream broke before `data: [DONE]`
    return ErrorKind.OTHER


def failure_message(exc: BaseException) -> str | None:
    """The reason to put on the record: what was malformed about a response, else None."""
    found = next((e for e in causes(exc) if isinstance(e, HttpError)), None)
    return clean(f"malformed response: {found}") if found is not None else None


def _connect_kind(chain: list[BaseException]) -> ErrorKind:
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return ErrorKind.CONNECT_REFUSED
    if any(isinstance(e, TimeoutError) for e in chain):
        return ErrorKind.CONNECT_TIMEOUT
    if any(isinstance(e, OSError) for e in chain):
        return ErrorKind.CONNECT
    return ErrorKind.OTHER
