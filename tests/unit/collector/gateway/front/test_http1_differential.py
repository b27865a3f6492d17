"""The gateway's request parser against h11 (a reference HTTP/1.1 parser) on generated requests.

Requests are built from parts that are mostly well-formed, with deviations mixed in: control
characters, bare LF, obs-fold, odd Content-Length and chunk-size spellings, duplicate Host,
Content-Length beside Transfer-Encoding. The properties:

- whatever the gateway accepts, h11 reads as exactly the same one request (method, target,
  headers, body, where it ends);
- the bytes the gateway forwards upstream for it, h11 reads as exactly one request carrying
  the same method, target, headers and body;
- whatever h11 refuses, the gateway refuses (or still waits for more bytes);
- where the gateway refuses what h11 takes, the request has one of the deliberate
  deviations below, each invalid by RFC 9110/9112 or outside the gateway's limits.

Deliberate differences (h11 is more lenient): a bare LF as a line end; obs-fold continuation
lines; control characters other than CR, LF and NUL in a header value; HTTP versions other
than 1.0 and 1.1; Content-Length beside Transfer-Encoding; Transfer-Encoding on HTTP/1.0;
spaces after a chunk size; chunk extensions outside the RFC grammar. (The gateway's one
lenience, one empty line before a request line, is not generated: it is never forwarded.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import h11
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from lanewatch.collector.gateway.upstream.forward import UpstreamRequest
from lanewatch.collector.gateway.upstream.pool import Upstream
from lanewatch.collector.gateway.upstream.request_headers import upstream_headers
from lanewatch.collector.http1.message import BadRequest, BodyParser, HttpError, ResponseHead, parse_request

TCHAR = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
VCHAR = bytes(range(0x21, 0x7F))
OBS = b"\x80\xa9\xc3\xff"
SMUGGLING = b"\x00\r\n"  # refused by both
OTHER_CTL = b"\x01\x07\x0b\x0c\x1b\x7f"  # refused by the gateway (RFC 9110 5.5); h11 takes some
REFUSED = "refused"
WAITING = "waiting"
CHUNKED = ResponseHead(200, "", (), True, "chunked")
UPSTREAM = Upstream("http://127.0.0.1:9/pre", "lane")


@dataclass
class Generated:
    """A generated request's bytes and the deliberate deviations put into it."""

    raw: bytes
    deviations: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Parsed:
    """One request as a parser read it; header names as sent, values with OWS trimmed."""

    method: bytes
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    used: int


def _text(alphabet: bytes, min_size: int = 0, max_size: int = 12) -> st.SearchStrategy[bytes]:
    return st.lists(st.sampled_from(list(alphabet)), min_size=min_size, max_size=max_size).map(bytes)


def _dirty(draw: st.DrawFn, clean: st.SearchStrategy[bytes], bad: bytes) -> bytes:
    """Mostly a draw of `clean`; one time in sixteen, one byte of `bad` put somewhere into it."""
    text = draw(clean)
    if draw(st.integers(0, 15)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + bytes([draw(st.sampled_from(list(bad)))]) + text[at:]
    return text


# Strategies built once: building them per example costs more than the parsers do.
METHODS = st.sampled_from([b"GET", b"POST", b"PUT", b"M-SEARCH"])
TARGETS = st.sampled_from([b"/", b"/v1/chat/completions", b"/a?b=c"])
VERSIONS = st.sampled_from([b"HTTP/1.1"] * 16 + [b"HTTP/1.0"] * 2 + [b"HTTP/2.0", b"HTTP/1.1 ", b"HTTPS/1.1"])
HOSTS = st.sampled_from([b"gw", b"127.0.0.1:8080", b""])
NAMES = st.sampled_from([b"X-Foo", b"Accept", b"Connection", b"Expect"])
TOKEN, VTEXT = _text(TCHAR, 1, 6), _text(VCHAR, 1, 8)
VALUE = _text(VCHAR + b"  \t" + OBS, 0, 10)
FRAMINGS = st.sampled_from(["none", "length", "chunked", "both", "short"])
LENGTHS = st.sampled_from([b"%d"] * 8 + [b"00%d", b"%d, %d", b" %d ", b"+%d", b"%d\xc2\xb2", b"0x%d"])
CODINGS = st.sampled_from([b"chunked"] * 6 + [b"Chunked", b"chunked, chunked", b"gzip"])
SIZES = st.sampled_from([b"%x"] * 16 + [b"%X", b"0%x", b"0x%x", b"%x ", b" %x", b"+%x"])
EXTENSIONS = st.sampled_from(
    [b""] * 16 + [b";a", b";a=b", b';a = "q\\"x"', b" ;a", b";a b", b";=", b";a=\x01"]
)
BAD_EXTENSIONS = (b";a b", b";=", b";a=\x01", b" ;a")
TRAILERS = st.sampled_from([b""] * 4 + [b"T: v\r\n", b"T v\r\n", b"T: \x00\r\n"])


@st.composite
def requests(draw: st.DrawFn) -> Generated:
    """A request, mostly valid, with deviations of every kind mixed in."""
    dev: set[str] = set()
    method = draw(METHODS) if draw(st.booleans()) else _dirty(draw, TOKEN, b" /@\x00")
    target = draw(TARGETS) if draw(st.booleans()) else _dirty(draw, VTEXT, OBS + b"\x00\x7f\t")
    version = draw(VERSIONS)
    if version == b"HTTP/2.0":
        dev.add("version")
    fields: list[tuple[bytes, bytes]] = []
    for _ in range(draw(st.sampled_from([1] * 8 + [0, 2]))):
        fields.append((b"Host", draw(HOSTS)))
    for _ in range(draw(st.integers(0, 3))):
        name = draw(NAMES) if draw(st.booleans()) else _dirty(draw, TOKEN, b" \t\x00\x01:\x80")
        if name[:1] in (b" ", b"\t"):
            dev.add("obs-fold")  # h11 joins the line to the one before
        value = _dirty(draw, VALUE, SMUGGLING + OTHER_CTL)
        if any(c in OTHER_CTL for c in value):
            dev.add("ctl in value")
        if b"\r" in value or b"\n" in value:
            dev.add("bare LF")  # h11 reads a bare LF as a line end
        fields.append((name, value))
    body, framing = b"", draw(FRAMINGS)
    payload = draw(st.binary(max_size=12))
    if framing in ("length", "short", "both"):
        length = len(payload) + (3 if framing == "short" else 0)  # short: fewer body bytes than announced
        fields.append((b"Content-Length", draw(LENGTHS).replace(b"%d", b"%d" % length)))
        body = payload
    if framing in ("chunked", "both"):
        fields.append((b"Transfer-Encoding", draw(CODINGS)))
        body = _chunked(draw, payload, dev)
        if framing == "both":
            dev.add("length and chunked")
        if version == b"HTTP/1.0":
            dev.add("chunked on 1.0")
    fields = draw(st.permutations(fields))
    eol = b"\r\n"
    if draw(st.integers(0, 15)) == 0:
        eol = b"\n"
        dev.add("bare LF")
    lines = [method + b" " + target + b" " + version] + [n + b":" + v for n, v in fields]
    if fields and draw(st.integers(0, 15)) == 0:
        lines.insert(draw(st.integers(2, len(lines))), b" folded")
        dev.add("obs-fold")
    return Generated(eol.join(lines) + eol + eol + body, dev)


def _chunked(draw: st.DrawFn, payload: bytes, dev: set[str]) -> bytes:
    """`payload` in chunks, with size lines and trailers spelled in valid and invalid ways."""
    cuts = sorted(draw(st.lists(st.integers(1, max(1, len(payload) - 1)), max_size=3)))
    parts = [payload[a:b] for a, b in zip([0, *cuts], [*cuts, len(payload)], strict=True) if payload[a:b]]
    out = b""
    for part in [*parts, b""]:
        size = draw(SIZES) % len(part)
        if size.endswith(b" "):
            dev.add("space after chunk size")
        ext = draw(EXTENSIONS)
        if ext in BAD_EXTENSIONS:
            dev.add("chunk extension")
        out += size + ext + b"\r\n" + part + (b"\r\n" if part else b"")
    return out + draw(TRAILERS) + b"\r\n"


def gateway(raw: bytes) -> Parsed | str:
    """What the gateway's front reads off `raw`: parse_request, then the body as the front takes it."""
    try:
        head, used = parse_request(raw)
    except BadRequest:
        return REFUSED
    if head is None:
        return WAITING
    rest = raw[used:]
    if head.framing == "length":
        if len(rest) < head.length:
            return WAITING
        body, used = rest[: head.length], used + head.length
    elif head.framing == "chunked":
        parser = BodyParser(CHUNKED)
        try:
            body = parser.feed(rest)
        except HttpError:
            return REFUSED
        if not parser.done:
            return WAITING
        used = len(raw) - len(parser.rest)
    else:
        body = b""
    headers = tuple((n.encode("latin-1"), v.encode("latin-1")) for n, v in head.headers)
    return Parsed(head.method.encode("latin-1"), head.target.encode("latin-1"), headers, body, used)


def reference(raw: bytes) -> Parsed | str:
    """What h11, as a server, reads off `raw`."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(raw)
    events: list[object] = []
    try:
        while not events or not isinstance(events[-1], h11.EndOfMessage):
            event = conn.next_event()
            if event is h11.NEED_DATA:
                return WAITING
            events.append(event)
    except h11.RemoteProtocolError:
        return REFUSED
    request = events[0]
    assert isinstance(request, h11.Request)
    body = b"".join(bytes(e.data) for e in events if isinstance(e, h11.Data))
    headers = tuple((bytes(n), bytes(v)) for n, v in request.headers.raw_items())
    used = len(raw) - len(conn.trailing_data[0])
    return Parsed(bytes(request.method), bytes(request.target), headers, body, used)


def _framing_free(headers: tuple[tuple[bytes, bytes], ...]) -> tuple[tuple[bytes, bytes], ...]:
    """Headers less the framing ones, which h11 normalizes (lowercase, one Content-Length)."""
    return tuple((n, v) for n, v in headers if n.lower() not in (b"content-length", b"transfer-encoding"))


def _forwarded(parsed: Parsed) -> bytes:
    """The request the gateway sends upstream for `parsed` (with a lane API key)."""
    text = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in parsed.headers]
    incoming = CIMultiDictProxy(CIMultiDict(text))
    target = parsed.target.decode("latin-1")
    headers = upstream_headers(incoming, "lane-key")
    return UpstreamRequest(parsed.method.decode(), target, headers, parsed.body, False).encode(UPSTREAM)


@settings(max_examples=2000, deadline=None)
@given(requests())
def test_the_gateway_reads_requests_as_h11_does_or_refuses_them(gen: Generated) -> None:
    ours, theirs = gateway(gen.raw), reference(gen.raw)
    if isinstance(ours, Parsed):
        assert isinstance(theirs, Parsed), f"the gateway took what h11 {theirs}: {gen.raw!r}"
        assert (ours.method, ours.target, ours.body, ours.used) == (
            theirs.method,
            theirs.target,
            theirs.body,
            theirs.used,
        )
        assert _framing_free(ours.headers) == _framing_free(theirs.headers)
        # What goes upstream is one request, the same one, with the lane's key and no hop-by-hop headers.
        up = reference(_forwarded(ours))
        assert isinstance(up, Parsed) and up.used == len(_forwarded(ours))
        assert (up.method, up.target, up.body) == (ours.method, b"/pre" + ours.target, ours.body)
        # Hop-by-hop headers (RFC 9110 7.6.1, RFC 2616 13.5.1) and the ones the gateway sets itself; a
        # generated name can spell any of them (b"tE").
        hop = {
            *(b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer"),
            *(b"transfer-encoding", b"upgrade", b"host", b"expect", b"content-length", b"authorization"),
            *(b"accept-encoding", b"traceparent", b"tracestate", b"x-lanewatch-lane"),
        }
        kept = tuple((n, v) for n, v in ours.headers if n.lower() not in hop)
        assert up.headers == ((b"Host", b"127.0.0.1:9"), *kept, (b"Authorization", b"Bearer lane-key"),
                              (b"Content-Length", b"%d" % len(ours.body)))  # fmt: skip
    elif theirs == REFUSED:
        assert ours in (REFUSED, WAITING)
    elif isinstance(theirs, Parsed):
        assert ours == REFUSED and gen.deviations, f"h11 took it, the gateway {ours}: {gen.raw!r}"
