"""Heads the gateway must neither pass on nor invite, over raw sockets on 127.0.0.1.

An upstream's response head whose reason, header names or values hold CR, LF or NUL gets
the client a 502 (passed on, the rest would be read as headers of the gateway's making);
an upstream's `x-lanewatch-*` headers never reach the client, the gateway's own do. A
request that asks `Expect: 100-continue` is asked for its body only once its credential
passed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from lanewatch.collector.common.headers import DEGRADED_HEADER, LANE_HEADER, MODEL_HEADER

from .gateway_harness import chat_body, gateway_server
from .test_gateway_hostile_http import ANSWER, exchange

pytestmark = pytest.mark.integration

TOKEN = "admin-s3cret"


@asynccontextmanager
async def canned_upstream(status_line: bytes, fields: bytes) -> AsyncIterator[str]:
    """An upstream answering every request with this status line and header fields, then ANSWER."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lengths = [ln[15:] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
                length = int(lengths[0]) if lengths else 0
                await reader.readexactly(length)
                writer.write(status_line + b"\r\nContent-Type: application/json\r\n" + fields)
                writer.write(b"Content-Length: %d\r\n\r\n%b" % (len(ANSWER), ANSWER))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


def _chat() -> bytes:
    body = json.dumps(chat_body(stream=False)).encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
    )


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


OK = b"HTTP/1.1 200 OK"


@pytest.mark.parametrize(
    ("status_line", "fields"),
    [
        (OK, b"X-Note: a\nSet-Cookie: session=attacker\r\n"),  # bare LF in a value
        (OK, b"X-Note: a\rSet-Cookie: session=attacker\r\n"),  # bare CR in a value
        (OK, b"X-Note: a\x00Set-Cookie: session=attacker\r\n"),  # NUL in a value
        (OK, b"X-No\nSet-Cookie: session=attacker\nte: a\r\n"),  # LF in a name
        (OK, b"X-No\x00te: session=attacker\r\n"),  # NUL in a name
        (b"HTTP/1.1 200 OK\nSet-Cookie: session=attacker", b""),  # LF in the reason phrase
    ],
)
async def test_cr_lf_or_nul_in_an_upstream_head_gets_502_and_nothing_of_it_passes(
    status_line: bytes, fields: bytes
) -> None:
    async with canned_upstream(status_line, fields) as url, gateway_server({"fast": [url]}) as g:
        got = await exchange(_port(g.url), _chat())
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 502 "), got[:300]
    assert b"attacker" not in got and b"Set-Cookie" not in head
    assert json.loads(body)["error"]["code"] == 502
    (record,) = g.records
    assert record.status == 502 and record.error is not None
    assert record.error_message is not None and "CR, LF or NUL" in record.error_message
    assert "attacker" not in record.error_message  # a header's value is never echoed: it may be a secret


async def test_upstream_lanewatch_headers_are_dropped_and_the_gateways_own_go_out() -> None:
    fields = (
        b"x-lanewatch-lane: forged\r\nX-Lanewatch-Degraded: shed\r\nx-lanewatch-anything: x\r\n"
        b"X-Kept: 1\r\nX-Kept: 2\r\nX-Request-Id: req-7\r\n"
    )
    async with canned_upstream(OK, fields) as url, gateway_server({"fast": [url]}) as g:
        got = await exchange(_port(g.url), _chat())
    head = got.partition(b"\r\n\r\n")[0].decode("latin-1")
    lines = head.split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK"
    own = [ln for ln in lines if ln.lower().startswith("x-lanewatch-")]
    # The gateway's own, once each; no degrade applied, so no x-lanewatch-degraded at all.
    assert own == [f"{LANE_HEADER}: fast", f"{MODEL_HEADER}: test-model -> test-model"], head
    assert "forged" not in head and DEGRADED_HEADER not in head.lower() and "anything" not in head
    assert "X-Kept: 1\r\nX-Kept: 2\r\nX-Request-Id: req-7" in head  # the rest passes, repeats and order kept
    (record,) = g.records
    assert (record.status, record.error, record.request_id) == (200, None, "req-7")


def _admin_put(auth: bytes, body: bytes) -> bytes:
    return (
        b"PUT /admin/degrade HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
        + auth
        + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body)
    )


BODY = json.dumps({"lanes": {}}).encode()


@pytest.mark.parametrize(
    ("token", "auth", "status"),
    [
        (True, b"", 401),
        (True, b"Authorization: Bearer wrong\r\n", 401),
        (False, f"Authorization: Bearer {TOKEN}\r\n".encode(), 403),  # the admin API is off
    ],
)
async def test_expect_continue_without_a_valid_token_is_refused_and_never_asked_for_its_body(
    tmp_path: Path, token: bool, auth: bytes, status: int
) -> None:
    (tmp_path / "token").write_text(TOKEN)
    cfg = {"admin_token_file": tmp_path / "token"} if token else {}
    async with gateway_server({"fast": ["http://127.0.0.1:9"]}, **cfg) as g:
        reader, writer = await asyncio.open_connection("127.0.0.1", _port(g.url))
        writer.write(_admin_put(auth, BODY))  # and waits, as a client does, to be asked for the body
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert first.startswith(b"HTTP/1.1 %d " % status), first  # not 100 Continue
        # Then closed: the body it never asked for is not read.
        rest = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        assert g.gw.degrade.version == 0
    assert b"Connection: close" in first and b"100 Continue" not in rest
    assert json.loads(rest)["error"]["code"] == status


async def test_expect_continue_with_the_token_is_asked_for_its_body(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN)
    async with gateway_server({"fast": ["http://127.0.0.1:9"]}, admin_token_file=tmp_path / "token") as g:
        reader, writer = await asyncio.open_connection("127.0.0.1", _port(g.url))
        writer.write(_admin_put(f"Authorization: Bearer {TOKEN}\r\n".encode(), BODY))
        async with asyncio.timeout(5):
            interim = await reader.readuntil(b"\r\n\r\n")
            writer.write(BODY)
            final = await reader.readuntil(b"\r\n\r\n")
        writer.close()
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert final.startswith(b"HTTP/1.1 ") and int(final[9:12]) not in (401, 403), final
