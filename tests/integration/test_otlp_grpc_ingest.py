"""OTLP/gRPC under attack on loopback: one ingest path with /v1/traces, and a slow client bounded.

Each test reproduces what once went wrong: Export took no token and ran none of the span
checks (a NaN span then turned the next POST /v1/records into a 500 and lost its records),
and one connection with 16 stalled streams made every other Export RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.collect.otlp_grpc import METHOD, SERVICE, GrpcSpanReceiver
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.record.batch import encode_batch, encode_record
from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.files import read_records
from lanewatch.exporters import names
from tests.servers import free_port
from tests.unit.collector.collect.test_otlp import protobuf_body, sdk_spans
from tests.unit.collector.record.test_batch import tap

from .test_collect_http import running

pytestmark = pytest.mark.integration

TOKEN = "s3cret-ingest-token"
BEARER = (("authorization", f"Bearer {TOKEN}"),)
PATH = f"/{SERVICE}/{METHOD}"


def body(trace_ids: list[int], queue: float) -> bytes:
    """An ExportTraceServiceRequest with one llm_request span per trace id, all with this queue time."""

    def attr(key: str, value: float) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(double_value=value))

    spans = [
        Span(
            trace_id=t.to_bytes(16, "big"),
            span_id=(i + 1).to_bytes(8, "big"),
            name="llm_request",
            attributes=[
                attr("gen_ai.latency.time_in_queue", queue),
                attr("gen_ai.latency.time_in_model_prefill", 0.02),
                attr("gen_ai.latency.time_in_model_decode", 0.2),
            ],
        )
        for i, t in enumerate(trace_ids)
    ]
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    encoded: bytes = request.SerializeToString()
    return encoded


async def export(
    port: int, payload: bytes, metadata: tuple[tuple[str, str], ...] = ()
) -> tuple[grpc.StatusCode, ExportTraceServiceResponse | None]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(PATH)
        try:
            answer = await call(payload, metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code(), None
        return grpc.StatusCode.OK, ExportTraceServiceResponse.FromString(answer)


async def samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with httpx.AsyncClient() as client:
        page = (await client.get(f"{url}/metrics")).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
    }


def without_refused(values: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[object, float]:
    return {k: v for k, v in values.items() if k[0] != names.OTLP_SPANS_REFUSED_TOTAL}


async def test_ten_thousand_bad_spans_without_then_with_the_token_change_no_metric_and_lose_no_record(
    tmp_path: Path,
) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    cfg = LanewatchConfig(
        gpu={"enabled": False},
        otlp={"join_wait_s": 60.0, "grpc_listen": "127.0.0.1:0"},
        ingest={"token_file": str(tmp_path / "token")},
        export={"records_path": str(tmp_path / "records.jsonl")},
    )
    records = [tap(i) for i in range(1, 21)]  # trace ids 1..20, HTTP 200: each waits for its span
    headers = {"content-type": "application/json", "authorization": f"Bearer {TOKEN}"}
    async with running(cfg) as (svc, url), httpx.AsyncClient(base_url=url, headers=headers) as client:
        assert svc.grpc_port is not None
        first = await client.post("/v1/records", content=encode_batch(encode_record(r) for r in records[:10]))
        assert first.status_code == 200 and first.json()["accepted"] == 10
        before = await samples(url)
        # 10 calls of 1,000 spans each, every one in the trace of a waiting record: half NaN, half -5 s.
        bad = [
            body([(k * 1000 + i) % 20 + 1 for i in range(1000)], float("nan") if k % 2 else -5.0)
            for k in range(10)
        ]
        for payload in bad:
            assert (await export(svc.grpc_port, payload))[0] is grpc.StatusCode.UNAUTHENTICATED
        assert await samples(url) == before  # nothing at all changed
        for payload in bad:
            code, answer = await export(svc.grpc_port, payload, BEARER)
            assert code is grpc.StatusCode.OK and answer is not None
            assert answer.partial_success.rejected_spans == 1000 and answer.partial_success.error_message
        after = await samples(url)
        assert without_refused(after) == without_refused(before)
        assert after[(names.OTLP_SPANS_REFUSED_TOTAL, (("reason", "invalid"),))] == 10_000
        assert (await client.get("/healthz")).json()["join_pending"] == {"records": 10, "spans": 0}
        # The records after them are taken (no 500), and every record joins its good span.
        rest = await client.post("/v1/records", content=encode_batch(encode_record(r) for r in records[10:]))
        assert rest.status_code == 200 and rest.json()["accepted"] == 10
        code, answer = await export(svc.grpc_port, body(list(range(1, 21)), 0.01), BEARER)
        assert code is grpc.StatusCode.OK and answer is not None and not answer.HasField("partial_success")
    lines = read_records(tmp_path / "records.jsonl").records
    assert sorted(r.request_id or "" for r in lines) == sorted(f"r{i}" for i in range(1, 21))
    assert all(r.queue_s == 0.01 and r.phases_source == "span" for r in lines), json.dumps(
        [r.to_json() for r in lines][:2]
    )


async def test_one_connection_of_stalled_streams_leaves_other_exports_served() -> None:
    receiver = GrpcSpanReceiver("127.0.0.1", 0, lambda spans: None)  # the defaults: 16 call slots
    port = await receiver.start()
    never = asyncio.Event()

    async def stalled() -> AsyncIterator[bytes]:  # a request whose message never comes; PINGs still answered
        await never.wait()
        yield b""

    # A connection of its own (channels in one process share connections unless told not to).
    attacker = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        stream: grpc.aio.StreamUnaryMultiCallable[bytes, bytes] = attacker.stream_unary(PATH)
        calls = [stream(stalled(), timeout=60) for _ in range(16)]
        # Wait (bounded) until the streams the server lets in are open.
        await asyncio.wait([asyncio.ensure_future(c.wait_for_connection()) for c in calls], timeout=3)
        code = await export(port, protobuf_body(sdk_spans(1)))
        assert code[0] is grpc.StatusCode.OK
    finally:
        await attacker.close()
        await receiver.shutdown()


async def test_a_call_whose_message_never_comes_ends_at_the_read_deadline() -> None:
    from lanewatch.collector.collect.otlp_grpc import GrpcLimits

    got: list[object] = []
    receiver = GrpcSpanReceiver("127.0.0.1", 0, got.append, limits=GrpcLimits(read_timeout_s=0.5))
    port = await receiver.start()
    never = asyncio.Event()

    async def stalled() -> AsyncIterator[bytes]:
        await never.wait()
        yield b""

    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stream: grpc.aio.StreamUnaryMultiCallable[bytes, bytes] = channel.stream_unary(PATH)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stream(stalled(), timeout=20)
            assert info.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            assert "within 0.5 s" in (info.value.details() or "")
        assert got == []
    finally:
        await receiver.shutdown()


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _reset_flood(port: int, body: bytes, calls: int) -> None:
    """Start `calls` Exports of `body` on a connection of its own and reset each at once (RST_STREAM)."""
    options = [("grpc.use_local_subchannel_pool", 1)]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(PATH)
        for _ in range(calls):
            call.future(body, timeout=5).cancel()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_a_rapid_reset_flood_gives_its_memory_back(tmp_path: Path) -> None:
    import threading

    from tests.waiting import eventually

    from .test_otlp_grpc import _collect, _spans_received, _stop

    http_port, grpc_port = free_port(), free_port()
    proc = _collect(tmp_path, {"gpu": {"enabled": False}}, http_port, grpc_port)
    log = tmp_path / "collect.log"
    try:
        eventually(lambda: _answers(http_port), 30, "the collector to serve", context=log.read_text)
        base = _rss_mb(proc.pid)
        big = protobuf_body(sdk_spans(2000))  # ~1 MiB a call
        floods = [threading.Thread(target=_reset_flood, args=(grpc_port, big, 300)) for _ in range(8)]
        peak = base
        for t in floods:
            t.start()
        while any(t.is_alive() for t in floods):
            peak = max(peak, _rss_mb(proc.pid))
            for t in floods:
                t.join(0.1)
        eventually(
            lambda: _rss_mb(proc.pid) < base + 40, 30, f"RSS back near {base:.0f} MB (peak {peak:.0f} MB)",
            context=lambda: f"now {_rss_mb(proc.pid):.0f} MB",
        )  # fmt: skip
        assert proc.poll() is None and _spans_received(http_port) >= 0
    finally:
        _stop(proc)


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def test_the_probes_grpc_receiver_hands_on_no_nan_span_and_answers_partial_success() -> None:
    from lanewatch.collector.collect.otlp_grpc import ThreadedGrpcReceiver

    from .test_otlp_grpc import export_sync

    got: list[list[ServerSpan]] = []
    receiver = ThreadedGrpcReceiver("127.0.0.1", 0, got.append)
    port = receiver.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(PATH)
            answer = ExportTraceServiceResponse.FromString(call(body([1], float("nan")), timeout=10))
        assert answer.partial_success.rejected_spans == 1
        assert export_sync(port, body([2], 0.01)) is grpc.StatusCode.OK
        assert [len(batch) for batch in got] == [0, 1]  # the NaN span never reached the join
    finally:
        receiver.shutdown()


async def test_a_call_of_forty_thousand_spans_leaves_the_loop_free() -> None:
    receiver = GrpcSpanReceiver("127.0.0.1", 0, lambda spans: None)
    port = await receiver.start()
    payload = body(list(range(1, 40_001)), 0.01)  # ~6 MB, under the 8 MiB limit
    loop = asyncio.get_running_loop()

    async def one_call() -> tuple[float, float, grpc.StatusCode, Any]:
        """(longest wait between two loop ticks, the call's length, its status, its answer)."""
        lags: list[float] = []
        done = asyncio.Event()

        async def tick() -> None:
            last = loop.time()
            while not done.is_set():
                await asyncio.sleep(0.005)
                lags.append(loop.time() - last)
                last = loop.time()

        ticker = asyncio.create_task(tick())
        try:
            started = loop.time()
            code, answer = await export(port, payload)
            took = loop.time() - started
        finally:
            done.set()
            await ticker
        return max(lags), took, code, answer

    calls = []
    try:
        # Decoding on the loop would stall it for the whole call, every call; a host too loaded
        # to schedule this process for a while can stall it once. So: the best of three calls.
        for _ in range(3):
            calls.append(await one_call())
            if calls[-1][0] < calls[-1][1] / 2:
                break
    finally:
        await receiver.shutdown()
    stall, took, code, answer = min(calls, key=lambda c: c[0] / c[1])
    # The decoding ran beside the loop: no wait between two ticks near the call's length.
    assert stall < took / 2, f"longest loop stall {stall:.3f} s in a {took:.3f} s call (best of {len(calls)})"
    assert code is grpc.StatusCode.OK and answer is not None
    assert answer.partial_success.rejected_spans == 40_000 - 2048


async def test_probe_exits_0_with_its_record_when_vllm_sends_a_nan_span_first() -> None:
    from aiohttp import web

    from tests.servers import serve_app

    from .scripted_server import chat_stream
    from .test_probe_cli import lanewatch

    grpc_port = free_port()

    async def chat(request: web.Request) -> web.StreamResponse:
        trace = int(request.headers["traceparent"].split("-")[1], 16)
        # Before the answer ends, as vLLM exports at finish: one NaN span in the probe's trace.
        code, _ = await export(grpc_port, body([trace], float("nan")))
        assert code is grpc.StatusCode.OK
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for _, part in chat_stream(3):
            await response.write(part)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner, url = await serve_app(app)
    try:
        code, out, err = await lanewatch(
            "probe", url, "-m", "m", "-n", "1", "--json", "--join-wait", "1",
            "--otlp-grpc-listen", f"127.0.0.1:{grpc_port}",
        )  # fmt: skip
    finally:
        await runner.cleanup()
    assert code == 0, err
    (line,) = [json.loads(x) for x in out.splitlines()]
    assert line["error"] is None and line["queue_s"] is None  # out unjoined, not lost
