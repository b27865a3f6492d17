"""The prober against small scripted HTTP servers on 127.0.0.1: phases, tokens, error kinds."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from lanewatch.collector.probe.prober import Prober, ProbeSpec
from lanewatch.collector.probe.settings import Target, Timeouts
from lanewatch.collector.record.timing import ErrorKind, RequestTiming, breakdown
from tests.servers import closed_port

from .scripted_server import (
    Received,
    Reply,
    ScriptedServer,
    chat_chunk,
    chat_stream,
    make_certs,
    sse,
    usage_chunk,
)

pytestmark = [pytest.mark.integration, pytest.mark.serial]

SHORT = ProbeSpec("short", "chat", max_tokens=5, prompt="SECRET-PROMPT-TEXT")
FAST = Timeouts(connect_s=2.0, ttft_s=2.0, stall_s=2.0, total_s=10.0)


def target(url: str, **kw: Any) -> Target:
    return Target(name="t", url=url, model="m", **kw)


async def probe_once(url: str, spec: ProbeSpec = SHORT, **kw: Any) -> RequestTiming:
    timeouts = kw.pop("timeouts", FAST)
    connection = kw.pop("connection", "warm")
    tracer = kw.pop("tracer", None)
    async with Prober(target(url, **kw), timeouts=timeouts, connection=connection, tracer=tracer) as p:
        return await p.probe(spec)


def stream(*parts: bytes) -> Reply:
    return Reply(parts=[(0.0, p) for p in parts])


# ---------------------------------------------------------------- success


async def test_chat_probe_measures_every_phase_and_sends_the_right_request(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("sk-TOPSECRET\n")
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(6, first_delay=0.2, gap=0.1))) as srv:
        r = await probe_once(srv.url("localhost"), api_key_file=key, lane="fast")
    req = srv.received[0]
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    body = req.json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 5 and body["ignore_eos"] is True and body["model"] == "m"
    assert body["messages"] == [{"role": "user", "content": "SECRET-PROMPT-TEXT"}]
    assert req.headers["authorization"] == "Bearer sk-TOPSECRET"
    assert req.headers["x-lanewatch-lane"] == "fast"
    assert r.ok and r.status == 200 and r.source == "probe" and r.lane == "fast"
    assert r.request_id == req.headers["x-request-id"]
    assert req.headers["traceparent"].split("-")[1] == r.trace_id
    assert r.dns_s and r.dns_s > 0 and r.connect_s and r.connect_s > 0 and r.tls_s == 0.0
    assert r.send_s is not None and r.send_s > 0
    assert r.ttfb_s is not None and r.ttft_s is not None and r.e2e_s is not None
    # The role chunk comes with the headers, the first token 0.2 s later: TTFT is at the token,
    # not the role chunk, and TTFB is at the headers, not the token. Both are measured against
    # the server's own write times, not a fixed bound that a stalled DNS lookup or connect breaks.
    assert 0.2 <= req.written[1] - req.written[0] <= r.ttft_s < r.e2e_s
    assert r.ttft_s - r.ttfb_s > (req.written[1] - req.written[0]) / 2
    # 5 gaps of 100 ms: their sum is the last token's read less the first's, so only a first read
    # late by 250 ms could hide enough of it; it never exceeds what followed the first token.
    assert len(r.itl_s) == 5 and 0.25 < sum(r.itl_s) <= r.e2e_s - r.ttft_s + 1e-3
    assert (r.output_tokens, r.prompt_tokens, r.tokens_from_usage) == (6, 7, True)
    text = json.dumps(r.to_json())
    assert "TOPSECRET" not in text and "SECRET-PROMPT" not in text


async def test_breakdown_sums_to_e2e() -> None:
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(4, first_delay=0.02, gap=0.005))) as srv:
        r = await probe_once(srv.url("localhost"))
    assert r.e2e_s is not None
    assert abs(sum(breakdown(r).values()) - r.e2e_s) < 1e-3


async def test_ttft_is_taken_at_the_read_that_delivers_the_first_content() -> None:
    # Content arrives 300 ms after the role chunk, the next 1 s later; the prober's TTFT must
    # match when the server wrote the first content, seen from the same clock: not the role
    # chunk's read (before it) nor the next token's (1 s after), whatever a loaded machine delays.
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(2, first_delay=0.3, gap=1.0))) as srv:
        r = await probe_once(srv.url())
    req = srv.received[0]
    assert r.ttft_s is not None
    written_first_content = req.written[1]
    client_first_content = r.ttft_s
    # The client's clock starts before the request went out, so it sees a little more.
    started = req.arrived - (r.connect_s or 0) - (r.send_s or 0)
    assert -0.001 < client_first_content - (written_first_content - started) < 0.5


async def test_the_caller_hears_of_the_first_token_as_it_comes_not_at_the_answers_end() -> None:
    # The scheduler runs a probe beside another only while that one still waits on the lane; it
    # learns of the first token from this call, while the rest of the answer still streams (1 s).
    told: list[float] = []
    reply = Reply(parts=chat_stream(2, first_delay=0.3, gap=1.0))
    async with ScriptedServer(lambda r: reply) as srv, Prober(target(srv.url()), timeouts=FAST) as p:
        r = await p.probe(SHORT, on_first_token=lambda: told.append(time.perf_counter()))
        ended = time.perf_counter()
    assert len(told) == 1
    assert told[0] >= srv.received[0].written[1]  # not before the first content was written
    assert ended - told[0] >= 0.9  # ... and not at the end: the second token came 1 s later
    assert r.output_tokens == 2 and r.error is None


async def test_completions_api_counts_text_chunks_when_usage_is_missing() -> None:
    def reply(_: Received) -> Reply:
        chunk = {"object": "text_completion", "choices": [{"index": 0, "text": "x", "finish_reason": None}]}
        empty = {
            "object": "text_completion",
            "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
        }
        return stream(sse(chunk), sse(chunk), sse(chunk), sse(empty), b"data: [DONE]\n\n")

    spec = ProbeSpec("short", "completions", max_tokens=3, prompt="p")
    async with ScriptedServer(reply) as srv:
        r = await probe_once(srv.url(), spec)
    assert srv.received[0].path == "/v1/completions"
    assert srv.received[0].json()["prompt"] == "p"
    assert r.ok and r.output_tokens == 3 and r.tokens_from_usage is False and r.prompt_tokens is None
    assert len(r.itl_s) == 2


async def test_keepalive_comments_do_not_count_as_tokens() -> None:
    async with ScriptedServer(
        lambda r: stream(
            b": ping\n\n",
            chat_chunk("", role="assistant"),
            b": ping\n\n",
            chat_chunk("a"),
            usage_chunk(2, 1),
            b"data: [DONE]\n\n",
        )
    ) as srv:
        r = await probe_once(srv.url())
    assert r.ok and r.output_tokens == 1 and r.itl_s == ()


async def test_a_long_stream_keeps_a_bounded_sample_of_its_gaps_with_exact_totals() -> None:
    events = 2500  # tiny content events, each its own chunk: one gap each, read one by one or many at once
    parts = [chat_chunk("", role="assistant"), *(chat_chunk("a") for _ in range(events))]
    async with ScriptedServer(lambda r: stream(*parts, b"data: [DONE]\n\n")) as srv:
        r = await probe_once(srv.url())
    assert r.ok and r.output_tokens == events and not r.tokens_from_usage
    assert 0 < len(r.itl_s) <= 1024 and r.itl_stats is not None and r.itl_stats.count == events - 1
    assert r.ttft_s is not None and r.e2e_s is not None
    assert r.itl_stats.sum_s <= r.e2e_s - r.ttft_s and max(r.itl_s) <= r.itl_stats.max_s
    assert len(json.dumps(r.to_json())) < 64 * 1024


# ---------------------------------------------------------------- connections


async def test_cold_probes_open_a_connection_each_time_warm_probes_reuse_one() -> None:
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(2))) as srv:
        async with Prober(target(srv.url("localhost")), connection="cold", timeouts=FAST) as p:
            cold = [await p.probe(SHORT) for _ in range(3)]
        assert srv.connections == 3
        async with Prober(target(srv.url("localhost")), connection="warm", timeouts=FAST) as p:
            warm = [await p.probe(SHORT) for _ in range(3)]
        assert srv.connections == 4
    assert all(r.ok for r in cold + warm)
    assert all(r.dns_s and r.connect_s for r in cold)
    assert warm[0].dns_s and warm[0].connect_s
    assert all((r.dns_s, r.connect_s, r.tls_s) == (0.0, 0.0, 0.0) for r in warm[1:])


async def test_a_kept_alive_connection_the_server_drops_is_replaced_not_reported() -> None:
    # The second request reaches the server on the kept-alive connection, which it closes unanswered
    # (as a server closing an idle connection at that moment does): the probe reconnects once.
    replies = iter([Reply(parts=chat_stream(2)), Reply(before_headers="close"), Reply(parts=chat_stream(2))])
    async with (
        ScriptedServer(lambda r: next(replies)) as srv,
        Prober(target(srv.url()), connection="warm", timeouts=FAST) as p,
    ):
        first, second = await p.probe(SHORT), await p.probe(SHORT)
    assert [r.connection for r in srv.received] == [1, 1, 2]
    assert first.ok and second.ok, (first.error, second.error)
    assert second.connect_s and second.connect_s > 0  # timed on the new connection


async def test_tls_phase_is_measured_and_sni_keeps_the_host_name(tmp_path: Path) -> None:
    certs = make_certs(tmp_path, names=("localhost",))
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(2)), tls=certs.server_context()) as srv:
        async with Prober(
            target(srv.url("localhost"), cacert=certs.ca), connection="cold", timeouts=FAST
        ) as p:
            cold = [await p.probe(SHORT) for _ in range(2)]
        async with Prober(
            target(srv.url("localhost"), cacert=certs.ca), connection="warm", timeouts=FAST
        ) as p:
            warm = [await p.probe(SHORT) for _ in range(2)]
    assert all(r.ok for r in cold + warm), [r.error for r in cold + warm]
    assert all(r.dns_s and r.connect_s and r.tls_s and r.tls_s > 0 for r in cold + warm[:1])
    assert (warm[1].dns_s, warm[1].connect_s, warm[1].tls_s) == (0.0, 0.0, 0.0)


# ---------------------------------------------------------------- failures


def _status(status: int) -> Reply:
    return Reply(status=status, headers={"content-type": "application/json"}, parts=[(0.0, b'{"error": {}}')])


@pytest.mark.parametrize(
    ("status", "kind"),
    [(429, ErrorKind.HTTP_429), (400, ErrorKind.HTTP_4XX), (404, ErrorKind.HTTP_4XX),
     (500, ErrorKind.HTTP_5XX), (503, ErrorKind.HTTP_5XX)],
)  # fmt: skip
async def test_http_error_statuses(status: int, kind: ErrorKind) -> None:
    async with ScriptedServer(lambda r: _status(status)) as srv:
        r = await probe_once(srv.url())
    assert (r.error, r.status) == (kind, status)
    assert r.ttft_s is None


async def test_an_error_body_is_read_for_its_reason_but_never_whole() -> None:
    # 1 MiB after the reason: the prober keeps the first bytes, stops reading past 64 KiB and
    # drops the connection (the next probe opens a new one) rather than draining it.
    reason = b'{"error": {"message": "model overloaded", "type": "ServiceUnavailable"}}'
    big = Reply(
        status=503, headers={"content-type": "application/json"}, parts=[(0.0, reason + b" " * 2**20)]
    )
    replies = iter([big, Reply(parts=chat_stream(2))])
    async with (
        ScriptedServer(lambda r: next(replies)) as srv,
        Prober(target(srv.url()), connection="warm", timeouts=FAST) as p,
    ):
        failed, after = await p.probe(SHORT), await p.probe(SHORT)
    assert (failed.error, failed.status) == (ErrorKind.HTTP_5XX, 503)
    assert failed.error_message == "model overloaded"
    assert after.ok and srv.connections == 2


SCRIPTS: dict[str, tuple[Reply, ErrorKind]] = {
    "clean end without [DONE]": (Reply(parts=chat_stream(3, done=False)), ErrorKind.TRUNCATED),
    "connection closed mid-stream": (Reply(parts=chat_stream(3)[:3], end="close"), ErrorKind.TRUNCATED),
    "connection reset mid-stream": (Reply(parts=chat_stream(3)[:3], end="reset"), ErrorKind.TRUNCATED),
    "malformed frame": (
        stream(chat_chunk("a"), b'data: {"choices": [{"delta": {"content": "b"\n\n', chat_chunk("c"),
               b"data: [DONE]\n\n"),
        ErrorKind.BAD_STREAM,
    ),
    "error object mid-stream": (
        stream(chat_chunk("a"), sse({"error": {"message": "engine died", "type": "InternalServerError"}}),
               b"data: [DONE]\n\n"),
        ErrorKind.STREAM_ERROR,
    ),
    "json instead of a stream": (
        Reply(headers={"content-type": "application/json"}, parts=[(0.0, b'{"choices": []}')]),
        ErrorKind.BAD_STREAM,
    ),
    "reset before any response": (Reply(before_headers="reset"), ErrorKind.CONNECT),
    "closed before any response": (Reply(before_headers="close"), ErrorKind.CONNECT),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_stream_failures_map_to_their_error_kind(name: str) -> None:
    reply, kind = SCRIPTS[name]
    async with ScriptedServer(lambda r: reply) as srv:
        r = await probe_once(srv.url())
    assert r.error is kind
    assert r.e2e_s is not None
    assert r.attrs.get("sse_bad_events") == ("1" if name == "malformed frame" else None)


TIGHT = Timeouts(connect_s=1.0, ttft_s=0.3, stall_s=0.2, total_s=5.0)


@pytest.mark.parametrize(
    ("parts", "kind", "limits"),
    [
        ([(0.0, chat_chunk("", role="assistant")), (5.0, chat_chunk("late"))], ErrorKind.TTFT_TIMEOUT, TIGHT),
        ([(0.0, chat_chunk("a")), (5.0, chat_chunk("b"))], ErrorKind.STALL, TIGHT),
        (
            [(0.0, chat_chunk("a"))] + [(0.1, chat_chunk("b"))] * 30,  # steady, but longer than the total
            ErrorKind.TIMEOUT,
            Timeouts(ttft_s=1.0, stall_s=1.0, total_s=0.8),
        ),
    ],
    ids=["ttft", "stall", "total"],
)
async def test_timeouts(parts: list[tuple[float, bytes]], kind: ErrorKind, limits: Timeouts) -> None:
    async with ScriptedServer(lambda r: Reply(parts=parts)) as srv:
        r = await probe_once(srv.url(), timeouts=limits)
    assert r.error is kind
    assert r.e2e_s is not None and r.e2e_s < 2.5


async def test_a_body_left_open_after_done_is_still_a_success() -> None:
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(2), end="hang")) as srv:
        started = time.perf_counter()
        r = await probe_once(srv.url(), timeouts=Timeouts(stall_s=0.2, total_s=5.0))
        waited = time.perf_counter() - started
    assert r.ok and r.output_tokens == 2
    # e2e ends at [DONE], not when we gave up on the open body: the prober waits a second for
    # its end after [DONE], so the probe took that much longer than e2e, however slow the host.
    assert r.e2e_s is not None and waited - r.e2e_s > 0.5


async def test_headers_then_silence_is_a_ttft_timeout() -> None:
    async with ScriptedServer(lambda r: Reply(parts=[], end="hang")) as srv:
        r = await probe_once(srv.url(), timeouts=TIGHT)
    assert r.error is ErrorKind.TTFT_TIMEOUT
    assert r.ttfb_s is not None  # headers came; text did not


async def test_nothing_listening_is_connect_refused() -> None:
    r = await probe_once(f"http://127.0.0.1:{closed_port()}")
    assert r.error is ErrorKind.CONNECT_REFUSED
    assert r.status is None and r.ttft_s is None


async def test_a_name_that_does_not_resolve_is_dns() -> None:
    r = await probe_once("http://no-such-host.invalid:8000", timeouts=Timeouts(connect_s=3.0))
    assert r.error is ErrorKind.DNS


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose accept queue is full: SYNs go unanswered, so connects hang."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fillers = []
    for _ in range(4):
        c = socket.socket()
        c.setblocking(False)
        c.connect_ex(("127.0.0.1", port))
        fillers.append(c)
    yield port
    for c in fillers:
        c.close()
    srv.close()


async def test_no_handshake_within_the_connect_timeout_is_connect_timeout(full_backlog: int) -> None:
    r = await probe_once(f"http://127.0.0.1:{full_backlog}", timeouts=Timeouts(connect_s=0.3))
    assert r.error is ErrorKind.CONNECT_TIMEOUT


async def test_untrusted_certificate_is_tls(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(1)), tls=certs.server_context()) as srv:
        untrusted = await probe_once(srv.url("localhost"))
        insecure = await probe_once(srv.url("localhost"), insecure=True)
    assert untrusted.error is ErrorKind.TLS
    assert insecure.ok and insecure.tls_s and insecure.tls_s > 0


async def test_probing_goes_on_after_failures() -> None:
    replies = iter([_status(503), Reply(parts=chat_stream(2, done=False)), Reply(parts=chat_stream(2))])
    async with ScriptedServer(lambda r: next(replies)) as srv, Prober(target(srv.url()), timeouts=FAST) as p:
        kinds = [(await p.probe(SHORT)).error for _ in range(3)]
    assert kinds == [ErrorKind.HTTP_5XX, ErrorKind.TRUNCATED, None]


# ---------------------------------------------------------------- spans


def _tracer() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


async def test_client_span_follows_genai_conventions_with_phase_children(tmp_path: Path) -> None:
    tracer, exporter = _tracer()
    key = tmp_path / "key"
    key.write_text("sk-TOPSECRET")
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(3, first_delay=0.01))) as srv:
        r = await probe_once(srv.url("localhost"), tracer=tracer, api_key_file=key)
    spans = exporter.get_finished_spans()
    parent = next(s for s in spans if s.parent is None)
    assert parent.name == "chat m" and parent.kind is SpanKind.CLIENT
    attrs = dict(parent.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == "m"
    assert attrs["gen_ai.provider.name"] == "vllm"
    assert attrs["gen_ai.usage.input_tokens"] == 7 and attrs["gen_ai.usage.output_tokens"] == 3
    assert attrs["server.address"] == "localhost" and attrs["server.port"] == srv.port
    assert format(parent.context.trace_id, "032x") == r.trace_id
    children = {s.name: s for s in spans if s.parent is not None}
    assert set(children) == {"dns", "connect", "send", "server_wait", "decode"}
    assert all(c.parent.span_id == parent.context.span_id for c in children.values())  # type: ignore[union-attr]
    assert parent.start_time is not None and parent.end_time is not None
    # The span opens while the request is built, a moment before the clock starts.
    assert 0 <= parent.end_time - parent.start_time - (r.e2e_s or 0) * 1e9 < 5e6
    decode = children["decode"]
    assert decode.end_time == parent.end_time
    dump = json.dumps([dict(s.attributes or {}) for s in spans])
    assert "SECRET" not in dump


async def test_failed_probe_span_carries_error_type() -> None:
    tracer, exporter = _tracer()
    async with ScriptedServer(lambda r: _status(429)) as srv:
        await probe_once(srv.url(), tracer=tracer)
    parent = next(s for s in exporter.get_finished_spans() if s.parent is None)
    assert (parent.attributes or {})["error.type"] == "http_429"
    assert parent.status.status_code is StatusCode.ERROR


async def test_record_content_puts_prompt_and_response_on_the_record_and_span() -> None:
    tracer, exporter = _tracer()
    async with (
        ScriptedServer(lambda r: Reply(parts=chat_stream(4))) as srv,
        Prober(target(srv.url()), timeouts=FAST, tracer=tracer, record_content=True) as p,
    ):
        r = await p.probe(SHORT)
    assert r.ok and r.prompt_text == "SECRET-PROMPT-TEXT" and r.response_text == "t0 t1 t2 t3 "
    attrs = dict(next(s for s in exporter.get_finished_spans() if s.parent is None).attributes or {})
    assert json.loads(str(attrs["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "SECRET-PROMPT-TEXT"}]}
    ]
    assert json.loads(str(attrs["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "t0 t1 t2 t3 "}],
            "finish_reason": "length",
        }
    ]


async def test_record_content_without_a_response_keeps_the_prompt_only() -> None:
    async with Prober(target(f"http://127.0.0.1:{closed_port()}"), timeouts=FAST, record_content=True) as p:
        r = await p.probe(SHORT)
    assert r.error is ErrorKind.CONNECT_REFUSED
    assert (r.prompt_text, r.response_text) == ("SECRET-PROMPT-TEXT", None)


async def test_without_record_content_no_text_is_kept() -> None:
    tracer, exporter = _tracer()
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(4))) as srv:
        r = await probe_once(srv.url(), tracer=tracer)
    assert (r.prompt_text, r.response_text) == (None, None)
    assert not {"prompt_text", "response_text"} & set(r.to_json())
    attrs = dict(next(s for s in exporter.get_finished_spans() if s.parent is None).attributes or {})
    assert not {"gen_ai.input.messages", "gen_ai.output.messages"} & set(attrs)
