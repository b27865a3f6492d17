from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lanewatch.collector.gateway.http1 import (
    BodyParser,
    HttpError,
    RequestError,
    ResponseHead,
    parse_head,
    parse_request,
)

CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_head_incomplete_then_complete() -> None:
    assert parse_head(CHUNKED[:-3]) == (None, 0)
    head, used = parse_head(CHUNKED + b"5\r\nhello")
    assert head is not None and used == len(CHUNKED)
    assert (head.status, head.reason, head.framing, head.keep_alive) == (200, "OK", "chunked", True)
    assert head.get("content-type") == "text/event-stream"


def test_interim_responses_are_skipped() -> None:
    head, used = parse_head(b"HTTP/1.1 100 Continue\r\n\r\n" + CHUNKED)
    assert head is not None and head.status == 200 and used == 25 + len(CHUNKED)


@pytest.mark.parametrize(
    ("raw", "framing", "length", "keep_alive"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", "length", 12, True),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\n", "length", 3, False),
        (b"HTTP/1.1 200 OK\r\n\r\n", "close", 0, False),
        (b"HTTP/1.1 204 No Content\r\n\r\n", "none", 0, True),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", "length", 1, False),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "chunked", 0, True),
    ],
)
def test_framing(raw: bytes, framing: str, length: int, keep_alive: bool) -> None:
    head, _ = parse_head(raw)
    assert head is not None and (head.framing, head.length, head.keep_alive) == (framing, length, keep_alive)


@pytest.mark.parametrize(
    "raw",
    [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 abc OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
     b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"],
)  # fmt: skip
def test_not_http_is_an_error(raw: bytes) -> None:
    with pytest.raises(HttpError):
        parse_head(raw)


BODY = [b"data: a\n\n", b"x" * 300, b"data: [DONE]\n\n"]
FRAMED = b"".join(b"%x;ext=1\r\n%b\r\n" % (len(p), p) for p in BODY) + b"0\r\nTrailer: x\r\n\r\n"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(FRAMED) - 1), max_size=10))
def test_chunked_body_split_anywhere(cuts: list[int]) -> None:
    head, _ = parse_head(CHUNKED)
    assert head is not None
    parser = BodyParser(head)
    out, prev = [], 0
    for cut in [*sorted(set(cuts)), len(FRAMED)]:
        assert not parser.done
        out.append(parser.feed(FRAMED[prev:cut]))
        prev = cut
    assert parser.done and b"".join(out) == b"".join(BODY)


def test_length_and_close_bodies() -> None:
    parser = BodyParser(ResponseHead(200, "OK", (), True, "length", 5))
    assert parser.feed(b"abc") == b"abc" and not parser.done
    assert parser.feed(b"de") == b"de" and parser.done
    closing = BodyParser(ResponseHead(200, "OK", (), False, "close"))
    assert closing.feed(b"xyz") == b"xyz" and not closing.done
    assert closing.eof() and closing.done
    assert not BodyParser(ResponseHead(200, "OK", (), True, "length", 5)).eof()  # cut short


def test_bad_chunk_size() -> None:
    parser = BodyParser(ResponseHead(200, "OK", (), True, "chunked"))
    with pytest.raises(HttpError, match="bad chunk size"):
        parser.feed(b"zz\r\n")


# ---------------------------------------------------------------------------------------------- requests


@pytest.mark.parametrize(
    ("raw", "method", "path", "framing", "length", "keep_alive", "expect"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: g\r\n\r\n", "GET", "/healthz", "none", 0, True, False),
        (b"\r\nPOST /v1/completions?x=1 HTTP/1.1\r\nHost: g\r\nContent-Length: 12\r\n\r\n", "POST",
         "/v1/completions", "length", 12, True, False),
        (b"POST /a HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n", "POST",
         "/a", "chunked", 0, False, False),
        (b"POST /a HTTP/1.1\r\nHost: g\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", "POST", "/a",
         "length", 3, True, True),
        (b"GET / HTTP/1.0\r\n\r\n", "GET", "/", "none", 0, False, False),
        (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", "GET", "/", "none", 0, True, False),
    ],
)  # fmt: skip
def test_request_heads(
    raw: bytes, method: str, path: str, framing: str, length: int, keep_alive: bool, expect: bool
) -> None:
    assert parse_request(raw[:-1]) == (None, 0)
    head, used = parse_request(raw + b"body")
    assert head is not None and used == len(raw)
    assert (head.method, head.path, head.framing, head.length) == (method, path, framing, length)
    assert (head.keep_alive, head.expect_continue) == (keep_alive, expect)


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),  # smuggling
        (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost : g\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: g\r\n folded\r\n\r\n", 400),
        (b"GET /\r\n\r\n", 400),
        (b"G=T / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"GET / HTTP/1.1\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", 431),
        (b"GET / HTTP/1.1\r\nX: " + b"y" * 70_000, 431),  # too long before it even ends
    ],
)
def test_bad_requests_carry_the_status_to_answer(raw: bytes, status: int) -> None:
    with pytest.raises(RequestError) as err:
        parse_request(raw)
    assert err.value.status == status


def test_whole_chunks_read_at_once_and_what_follows_the_end_is_kept() -> None:
    parser = BodyParser(ResponseHead(200, "OK", (), True, "chunked"))
    events = [b"data: a\n\n", b"data: " + b"b" * 500 + b"\n\n"]
    for event in events:  # one read per chunk: the common case
        assert parser.feed(b"%x\r\n%b\r\n" % (len(event), event)) == event
    assert parser.feed(b"5\r\nhel") == b"hel"  # then a split chunk, the general path
    assert parser.feed(b"lo\r\n0\r\n\r\nGET /next") == b"lo"
    assert parser.done and parser.rest == b"GET /next"
