"""Response heads are read once and bounded: interim heads are capped, so is a response's head in all."""

from __future__ import annotations

import asyncio

import pytest

from lanewatch.collector.http1.client import UpstreamConn, UpstreamGone
from lanewatch.collector.http1.message import MAX_HEAD, MAX_INTERIM, HeadReader, HttpError, parse_head

FINAL = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 5\r\n\r\n"
INTERIM = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"


class Transport:
    """What an UpstreamConn calls on its transport."""

    def __init__(self) -> None:
        self.aborted = False

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True


def conn() -> tuple[UpstreamConn, Transport]:
    c, t = UpstreamConn(("127.0.0.1", 1, False)), Transport()
    c.transport = t  # type: ignore[assignment]
    c.send(b"GET / HTTP/1.1\r\n\r\n")
    return c, t


def test_a_few_interim_heads_are_skipped_fed_any_way() -> None:
    raw = INTERIM * MAX_INTERIM + FINAL + b"hello"
    head, used = parse_head(raw)
    assert head is not None and head.status == 200 and used == len(raw) - 5
    reader = HeadReader()
    found = None
    for i in range(len(raw)):  # one byte at a time: each byte scanned once, the head found once
        found = reader.feed(raw[i : i + 1])
        if found is not None:
            break
    assert found is not None and found[0].status == 200 and i == len(raw) - 6


def test_more_interim_heads_than_the_cap_are_an_error() -> None:
    with pytest.raises(HttpError, match=f"more than {MAX_INTERIM} interim"):
        parse_head(INTERIM * (MAX_INTERIM + 1) + FINAL)


def test_endless_interim_heads_stop_a_connection_after_a_bounded_read() -> None:
    c, t = conn()
    fed = 0
    for _ in range(10_000):  # an upstream that sends 1xx heads forever
        c.data_received(b"HTTP/1.1 100 Continue\r\n\r\n")
        fed += 1
        if t.aborted:
            break
    assert t.aborted and fed == MAX_INTERIM + 1
    with pytest.raises(HttpError, match="interim"):
        asyncio.run(c.head(1.0))


def test_a_head_that_never_ends_is_an_error_within_the_cap() -> None:
    c, t = conn()
    c.data_received(b"HTTP/1.1 200 OK\r\n")
    fed = 0
    while not t.aborted and fed < 10 * MAX_HEAD:
        c.data_received(b"x-pad: " + b"a" * 93 + b"\r\n")
        fed += 102
    assert t.aborted and fed <= MAX_HEAD + 102  # refused by the read that passed the cap
    with pytest.raises(HttpError, match="larger than 64 KiB"):
        asyncio.run(c.head(1.0))


def test_interim_heads_count_towards_the_head_cap() -> None:
    big = b"HTTP/1.1 103 Early Hints\r\nLink: " + b"a" * (MAX_HEAD // 2) + b"\r\n\r\n"
    with pytest.raises(HttpError, match="larger than"):
        parse_head(big * 2 + FINAL)


def test_a_head_cut_short_by_the_end_of_the_connection_is_malformed() -> None:
    c, _ = conn()
    c.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n")
    c.eof_received()
    with pytest.raises(HttpError, match="inside the response head"):
        asyncio.run(c.head(1.0))


def test_a_connection_closed_before_any_byte_is_still_a_fresh_drop() -> None:
    c, _ = conn()
    c.eof_received()
    with pytest.raises(UpstreamGone) as info:
        asyncio.run(c.head(1.0))
    assert info.value.fresh


def test_the_body_after_a_head_in_the_same_read_is_delivered() -> None:
    c, _ = conn()
    c.data_received(INTERIM + FINAL[:20])
    c.data_received(FINAL[20:] + b"hel")
    c.data_received(b"lo")
    got: list[bytes] = []

    class Sink:
        def payload(self, data: bytes) -> None:
            got.append(data)

    c.attach(Sink())
    assert c.done and b"".join(got) == b"hello"
    assert c.response_head is not None and c.response_head.status == 200
