"""What of an upstream's response head reaches the client: CR, LF and NUL refused, own headers dropped."""

from __future__ import annotations

import pytest

from lanewatch.collector.gateway.upstream.response_head import check_head, client_headers
from lanewatch.collector.http1.message import HttpError, ResponseHead


def _head(fields: bytes, status_line: bytes = b"HTTP/1.1 200 OK") -> ResponseHead:
    """The head as the HTTP/1.1 client reads it: lines split at CRLF only, latin-1, values trimmed."""
    reason = status_line.decode("latin-1").split(" ", 2)[2]
    lines = fields.decode("latin-1").split("\r\n")[:-1]
    headers = tuple((name, value.strip()) for name, _, value in (ln.partition(":") for ln in lines))
    return ResponseHead(int(status_line[9:12]), reason, headers, True, "length", 0)


@pytest.mark.parametrize(
    ("status_line", "fields", "named"),
    [
        (b"HTTP/1.1 200 OK", b"X-Note: a\nSet-Cookie: s=1\r\n", "'X-Note'"),
        (b"HTTP/1.1 200 OK", b"X-Note: a\rb\r\n", "'X-Note'"),
        (b"HTTP/1.1 200 OK", b"X-Note: a\x00b\r\n", "'X-Note'"),
        (b"HTTP/1.1 200 OK", b"X-N\x00ote: a\r\n", "'X-N\\x00ote'"),
        (b"HTTP/1.1 200 O\nK", b"", "reason phrase"),
        (b"HTTP/1.1 200 O\x00K", b"", "reason phrase"),
    ],
)
def test_cr_lf_or_nul_anywhere_in_the_head_refuses_it_naming_where_not_the_value(
    status_line: bytes, fields: bytes, named: str
) -> None:
    with pytest.raises(HttpError, match="CR, LF or NUL") as err:
        check_head(_head(fields, status_line))
    assert named in str(err.value) and "s=1" not in str(err.value) and "b'" not in str(err.value)


def test_a_clean_head_passes_with_tabs_and_latin1_bytes() -> None:
    check_head(_head(b"X-A: a\tb\r\nX-B: caf\xe9\r\n", b"HTTP/1.1 404 Not Found"))


def test_hop_by_hop_and_upstream_lanewatch_headers_are_dropped_and_the_gateways_own_follow() -> None:
    head = _head(
        b"Connection: keep-alive\r\nServer: up\r\nDate: x\r\nX-Lanewatch-Lane: forged\r\n"
        b"x-lanewatch-degraded: shed\r\nX-Dup: 1\r\nX-Dup: 2\r\nX-Lanewatch: not-a-prefix-match\r\n"
    )
    own = {"x-lanewatch-lane": "fast"}
    assert client_headers(head, own) == [
        ("X-Dup", "1"),
        ("X-Dup", "2"),
        ("X-Lanewatch", "not-a-prefix-match"),
        ("x-lanewatch-lane", "fast"),
    ]
