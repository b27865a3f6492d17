"""The gateway's data path against a test upstream with known chunk timing (all on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from lanewatch.collector.record.timing import ErrorKind
from tests.servers import closed_port, serve_app

from .gateway_harness import (
    TRUST_LOOPBACK,
    chat_body,
    eventually,
    gateway_server,
    one_lane,
    read_events,
    upstream_server,
)

pytestmark = pytest.mark.integration
CHAT = "/v1/chat/completions"


async def test_chunks_are_not_buffered_and_the_tap_records_the_stream() -> None:
    async with one_lane(first_ms=50, gap_ms=50) as (up, g, s), s.post(g.url + CHAT, json=chat_body(6)) as r:
        assert r.status == 200
        assert r.headers["x-lanewatch-lane"] == "slow"
        assert "x-lanewatch-degraded" not in r.headers
        events = await read_events(r)
    content = [t for t, e in events if b'"content":"t' in e]
    assert len(content) == 6
    # 50 ms apart upstream: each went on as it came. A stall of this process between two
    # chunks can shorten one gap by its length, so: the median, and no two chunks together.
    gaps = sorted(b - a for a, b in itertools.pairwise(content))
    assert gaps[len(gaps) // 2] >= 0.040 and gaps[0] >= 0.020, gaps
    assert not any(b'"usage"' in e for _, e in events)  # the gateway asked for usage; the client did not
    assert events[-1][1] == b"data: [DONE]"
    assert up.last().body["stream_options"] == {"include_usage": True}
    rec = g.records[-1]
    assert (rec.source, rec.lane, rec.request_class, rec.status, rec.error) == (
        "tap",
        "slow",
        "interactive",
        200,
        None,
    )
    assert rec.output_tokens == 6 and rec.tokens_from_usage and rec.prompt_tokens == 7
    assert rec.ttft_s is not None and 0.045 <= rec.ttft_s < 0.5
    assert len(rec.itl_s) == 5 and sorted(rec.itl_s)[2] >= 0.040 and min(rec.itl_s) >= 0.020
    assert rec.e2e_s is not None and rec.e2e_s >= rec.ttft_s + 0.2
    assert rec.ttfb_s is not None and rec.ttfb_s < rec.ttft_s
    assert rec.connect_s is not None and rec.send_s is not None


async def test_usage_the_client_asked_for_goes_through() -> None:
    body = chat_body(3, stream_options={"include_usage": True})
    async with one_lane() as (_up, g, s), s.post(g.url + CHAT, json=body) as r:
        events = await read_events(r)
    assert sum(b'"usage":{' in e for _, e in events) == 1
    assert g.records[-1].output_tokens == 3


async def test_client_disconnect_cancels_the_upstream_request() -> None:
    async with one_lane(first_ms=10, gap_ms=100) as (up, g, s):
        r = await s.post(g.url + CHAT, json=chat_body(50))
        await r.content.readuntil(b'"content":"t0')
        r.close()  # hang up mid-stream
        log = up.last()
        await asyncio.wait_for(log.ended.wait(), 3)
        assert log.cancelled and not log.finished
        assert len(log.writes) < 10  # stopped well before its 50 chunks (5 s)
        assert await eventually(lambda: bool(g.records))
        assert g.records[-1].error is ErrorKind.CLIENT_DISCONNECT
        assert all(u.outstanding == 0 and u.failures == 0 for u in g.gw.pools["slow"].upstreams)


async def test_upstream_down_is_an_openai_error_and_ejected() -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    cfg = {"eject_after_failures": 2, "health_interval_s": 60}
    async with gateway_server({"slow": [dead]}, **cfg) as g, aiohttp.ClientSession() as s:
        for _ in range(2):
            async with s.post(g.url + CHAT, json=chat_body()) as r:
                assert r.status == 502
                assert r.headers["x-lanewatch-lane"] == "slow"
                err = (await r.json())["error"]
        async with s.get(f"{g.url}/healthz") as h:
            assert h.status == 503
    assert err["code"] == 502 and err["type"] == "BadGatewayError" and "slow" in err["message"]
    assert g.records[-1].error is ErrorKind.CONNECT_REFUSED and g.records[-1].status == 502
    assert not g.gw.pools["slow"].upstreams[0].healthy


async def test_connect_failure_retries_another_upstream_of_the_lane() -> None:
    dead_url = f"http://127.0.0.1:{closed_port()}"
    async with (
        upstream_server() as (up, url),
        gateway_server({"slow": [dead_url, url]}) as g,
        aiohttp.ClientSession() as s,
    ):
        for _ in range(4):
            async with s.post(g.url + CHAT, json=chat_body()) as r:
                assert r.status == 200
                await r.read()
    assert len(up.requests) == 4
    assert all(rec.ok and rec.target == url.removeprefix("http://") for rec in g.records), [
        (r.error, r.target) for r in g.records
    ]


@pytest.mark.parametrize("status", [500, 503])
async def test_upstream_error_status_reaches_the_client_as_openai_json(status: int) -> None:
    headers = {"x-test-status": str(status)}
    async with one_lane() as (_up, g, s), s.post(g.url + CHAT, json=chat_body(), headers=headers) as r:
        assert r.status == status
        assert (await r.json())["error"]["code"] == status
    assert g.records[-1].error is ErrorKind.HTTP_5XX


async def test_stream_ended_without_done_is_passed_on_as_is() -> None:
    headers = {"x-test-truncate": "1"}
    async with one_lane() as (_up, g, s), s.post(g.url + CHAT, json=chat_body(), headers=headers) as r:
        events = await read_events(r)
    assert g.records[-1].error is ErrorKind.TRUNCATED
    assert len(events) == 5 and not any(e == b"data: [DONE]" for _, e in events)  # no invented end


async def test_broken_upstream_connection_gets_an_error_frame() -> None:
    headers = {"x-test-abort": "1"}
    async with one_lane() as (_up, g, s), s.post(g.url + CHAT, json=chat_body(), headers=headers) as r:
        assert r.status == 200
        events = await read_events(r)
    error = json.loads(events[-2][1].removeprefix(b"data: "))["error"]
    assert error["code"] == 502 and "upstream" in error["message"]
    assert events[-1][1] == b"data: [DONE]"
    assert g.records[-1].error is ErrorKind.TRUNCATED


async def test_trace_context_propagated_or_created() -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with one_lane() as (up, g, s):
        for headers in ({"traceparent": parent}, {}):
            async with s.post(g.url + CHAT, json=chat_body(), headers=headers) as r:
                await r.read()
    sent = [log.headers["traceparent"] for log in up.requests.values()]
    assert sent[0].split("-")[1] == "0af7651916cd43dd8448eb211c80319c"  # same trace
    assert sent[0].split("-")[2] != "b7ad6b7169203331"  # a new parent: the gateway's server span
    assert g.records[0].trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert g.records[1].trace_id == sent[1].split("-")[1] and len(g.records[1].trace_id or "") == 32


async def test_non_streaming_completions_models_and_refusals() -> None:
    body = {"model": "m", "prompt": "x", "max_tokens": 3}
    fast_only = {"x-lanewatch-lane": "fast"}
    async with (
        upstream_server(model="a") as (_a, fast),
        upstream_server(model="b") as (_b, slow),
        gateway_server({"fast": [fast], "slow": [slow]}, hints=TRUST_LOOPBACK) as g,
        aiohttp.ClientSession() as s,
    ):
        async with s.post(f"{g.url}/v1/completions", json=body, headers=fast_only) as r:
            assert r.status == 200 and r.headers["x-lanewatch-lane"] == "fast"
            assert (await r.json())["choices"][0]["text"] == "t0 t1 t2 "
        async with s.get(f"{g.url}/v1/models") as r:
            assert [m["id"] for m in (await r.json())["data"]] == ["a", "b"]
        async with s.post(f"{g.url}/v1/completions", data=b"{nope") as r:
            assert r.status == 400 and "JSON" in (await r.json())["error"]["message"]
        async with s.post(f"{g.url}/v1/completions", json=body, headers={"x-lanewatch-lane": "x"}) as r:
            assert r.status == 400 and (await r.json())["error"]["param"] == "x-lanewatch-lane"
        async with s.post(f"{g.url}/v1/completions", json=body, headers={"x-lanewatch-class": "no way"}) as r:
            assert r.status == 400 and (await r.json())["error"]["param"] == "x-lanewatch-class"
        async with s.get(f"{g.url}/v1/nothing") as r:
            assert r.status == 404 and "error" in json.loads(await r.read())
    rec = g.records[0]
    assert (rec.api, rec.lane, rec.output_tokens, rec.tokens_from_usage, rec.ttft_s) == (
        "completions",
        "fast",
        3,
        True,
        None,
    )
    assert len(g.records) == 1  # refused requests are not proxied, so not tapped


async def test_health_checks_eject_and_restore() -> None:
    async with one_lane(health_interval_s=0.05) as (up, g, s):
        up.healthy = False
        assert await eventually(lambda: g.gw.pools["slow"].healthy_count == 0)
        async with s.get(f"{g.url}/healthz") as r:
            assert r.status == 503 and (await r.json())["lanes"]["slow"]["healthy"] == 0
        up.healthy = True
        assert await eventually(lambda: g.gw.pools["slow"].healthy_count == 1)
        async with s.get(f"{g.url}/healthz") as r:
            assert r.status == 200


async def test_server_span_exported_with_the_ids_sent_upstream() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    spans: list[Any] = []

    async def receive(request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await request.read())
        spans.extend(s for rs in export.resource_spans for ss in rs.scope_spans for s in ss.spans)
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", receive)
    runner, otlp = await serve_app(app)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    try:
        async with one_lane(otlp_endpoint=f"{otlp}/v1/traces") as (up, g, s):
            body = chat_body(3, content="zebra crossing")
            async with s.post(g.url + CHAT, json=body, headers={"traceparent": parent}) as r:
                await r.read()
            assert await eventually(lambda: bool(spans), 5)
    finally:
        await runner.cleanup()
    (span,) = spans
    sent = up.last().headers["traceparent"].split("-")
    assert span.trace_id.hex() == sent[1] == "0af7651916cd43dd8448eb211c80319c"
    assert span.span_id.hex() == sent[2]  # the span the upstream request names as its parent
    assert span.parent_span_id.hex() == "b7ad6b7169203331"
    assert span.kind == span.SPAN_KIND_SERVER and span.name == "POST /v1/chat/completions"
    attrs = {a.key: a.value for a in span.attributes}
    assert attrs["lanewatch.served_lane"].string_value == "slow"
    assert attrs["gen_ai.usage.output_tokens"].int_value == 3
    assert attrs["http.response.status_code"].int_value == 200
    assert not any("zebra" in v.string_value for v in attrs.values())  # no prompt text on spans
    rec = g.records[-1]
    assert rec.e2e_s is not None
    assert span.end_time_unix_nano - span.start_time_unix_nano == pytest.approx(rec.e2e_s * 1e9, rel=0.01)
