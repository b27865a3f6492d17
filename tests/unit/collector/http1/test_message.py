from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lanewatch.collector.http1.message import (
    BadRequest,
    BodyParser,
    HttpError,
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


@pytest.mark.parametrize(
    "size",
    [b"0x39", b"3_9", b"+39", b" 39", b"39 ", b" 39 ", b"-0", b"0" * 17 + b"39", b"39 ;a", b"39;a b", b"39;=",
     b"39\n", b"39;a=\x00", b"\xb3\xb9"],
)  # fmt: skip
def test_chunk_sizes_are_hex_digits_then_rfc_extensions_only(size: bytes) -> None:
    raw = size + b"\r\n" + b"x" * 57 + b"\r\n"
    for parts in ([raw], [raw[:3], raw[3:]]):  # the one-whole-chunk fast path and the general one
        parser = BodyParser(ResponseHead(200, "OK", (), True, "chunked"))
        with pytest.raises(HttpError):
            _feed_all(parser, parts)


def _feed_all(parser: BodyParser, parts: list[bytes]) -> None:
    for part in parts:
        parser.feed(part)


def test_valid_chunk_extensions_and_trailers_are_read_and_dropped() -> None:
    parser = BodyParser(ResponseHead(200, "OK", (), True, "chunked"))
    raw = b'5;a=b;c="q\\"x";  d = ""\r\nhello\r\n0000000000000000;e\r\nT: v\r\nU:\r\n\r\n'
    assert parser.feed(raw) == b"hello" and parser.done and parser.rest == b""


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"1;e=" + b"v" * 2000 + b"\r\nx\r\n", "longer than 1024"),  # one line, in one read
        (b"1;e=" + b"v" * 2000, "longer than 1024"),  # before its end arrives
        (b"".join(b"1;e=%s\r\nx\r\n" % (b"v" * 1000) for _ in range(20)), "extensions longer"),
        (b"0\r\n" + b"T: v\r\n" * 3000 + b"\r\n", "trailer fields"),
        (b"0\r\nT: " + b"v" * 20_000 + b"\r\n\r\n", "longer than 16384"),
        (b"0\r\nT v\r\n\r\n", "bad trailer"),
        (b"0\r\nT: a\x00\r\n\r\n", "bad trailer"),
    ],
)
def test_chunk_extensions_and_trailers_are_bounded(raw: bytes, match: str) -> None:
    parser = BodyParser(ResponseHead(200, "OK", (), True, "chunked"))
    with pytest.raises(HttpError, match=match):
        parser.feed(raw)


def test_header_bytes_are_kept_as_they_came() -> None:
    raw = b"GET / HTTP/1.1\r\nHost: g\r\nX-Utf8: Jos\xc3\xa9 \t\r\nX-Empty:\r\nX-Dup: 1\r\nX-Dup: 2\r\n\r\n"
    head, _ = parse_request(raw)
    assert head is not None
    wire = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in head.headers]
    assert wire == [
        (b"Host", b"g"),
        (b"X-Utf8", b"Jos\xc3\xa9"),
        (b"X-Empty", b""),
        (b"X-Dup", b"1"),
        (b"X-Dup", b"2"),
    ]


def test_a_head_sent_a_byte_at_a_time_is_scanned_once() -> None:
    raw = b"GET / HTTP/1.1\r\nHost: g\r\n\r\n"
    buf, seen = bytearray(), 0
    for i, byte in enumerate(raw):
        buf.append(byte)
        head, used = parse_request(buf, seen=seen)
        if i < len(raw) - 1:
            assert head is None
            seen = len(buf)
    assert head is not None and used == len(raw)


def test_an_upstream_status_or_length_in_other_digits_is_an_error() -> None:
    for raw in (b"HTTP/1.1 2\xb200 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n"):
        with pytest.raises(HttpError):
            parse_head(raw)


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
        (b"POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 3, 4\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: g\r\nContent-Length: -3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: g\r\nContent-Length: \xb2\r\n\r\n", 400),  # latin-1 superscript two
        (b"POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 1234567890123456789\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (
            b"POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            501,
        ),
        (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost : g\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),  # no Host
        (b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400),
        (b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: g\r\nX Y: z\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: g\r\nX\x00Y: z\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: g\r\nX: a\x00b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: g\r\nX: a\rb\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: g\r\nX: a\x7f\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: g\r\nX: a\nGET /smuggled HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: g\r\nX: a\n", 400),  # refused before the head ends
        (b"GET /\x01 HTTP/1.1\r\nHost: g\r\n\r\n", 400),
        (b"GET /caf\xe9 HTTP/1.1\r\nHost: g\r\n\r\n", 400),
        (b"G\xc9T / HTTP/1.1\r\nHost: g\r\n\r\n", 400),
        (b"GET  / HTTP/1.1\r\nHost: g\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: g\r\n folded\r\n\r\n", 400),
        (b"GET /\r\n\r\n", 400),
        (b"G=T / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"GET / HTTP/1.1\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", 431),
        (b"GET / HTTP/1.1\r\nX: " + b"y" * 70_000, 431),  # too long before it even ends
    ],
)
def test_bad_requests_carry_the_status_to_answer(raw: bytes, status: int) -> None:
    with pytest.raises(BadRequest) as err:
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
