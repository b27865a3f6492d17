"""POST /v1/traces under attack: NaN and negative span times, floods of spans, and the ingest token.

Each test reproduces what once went wrong: a `doubleValue: "NaN"` queue time made
lanewatch_phase_seconds_sum NaN for good and lost the record from the file; one 10,000-span
POST pushed out a span a record was waiting for; /v1/traces took no token while
/v1/records required one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from lanewatch.collector.collect.otlp import ATTR_DECODE, ATTR_PREFILL, ATTR_QUEUE
from lanewatch.collector.collect.otlp_http import TRACES_PATH
from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.files import read_records
from lanewatch.collector.record.join import Joiner
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.exporters import names
from tests.unit.collector.collect.test_service import Clock, config, service, text
from tests.unit.collector.record.test_batch import tap

JSON = {"content-type": "application/json"}


def spans_body(spans: list[tuple[str, dict[str, Any]]]) -> bytes:
    """An OTLP JSON request with one llm_request span per (trace id, attributes)."""

    def attr(key: str, v: Any) -> dict[str, Any]:
        return {"key": key, "value": {"doubleValue": v}}

    items = [
        {
            "traceId": trace,
            "spanId": "00" * 8,
            "name": "llm_request",
            "attributes": [attr(k, v) for k, v in a.items()],
        }
        for trace, a in spans
    ]
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": items}]}]}).encode()


def phases(queue: Any = 0.01, prefill: Any = 0.02, decode: Any = 0.2) -> dict[str, Any]:
    return {ATTR_QUEUE: queue, ATTR_PREFILL: prefill, ATTR_DECODE: decode}


def test_a_nan_or_negative_span_is_rejected_and_the_record_stays_readable(tmp_path: Path) -> None:
    clock = Clock()
    svc, seen = service(config(tmp_path), clock)
    client = TestClient(svc.app())
    record = tap(1)  # trace id 000...01, status 200: it waits for its span
    svc.submit(record)
    body = spans_body([(record.trace_id or "", phases(queue="NaN")), (f"{2:032x}", phases(decode=-0.5))])
    r = client.post(TRACES_PATH, content=body, headers=JSON)
    assert r.status_code == 200
    assert r.json()["partialSuccess"]["rejectedSpans"] in ("2", 2)
    assert "not a finite, non-negative" in r.json()["partialSuccess"]["errorMessage"]
    assert svc.joiner is not None and svc.joiner.pending == (1, 0)  # the record still waits, unjoined
    clock.now += 10
    svc.expire()
    assert [x.request_id for x in seen] == ["r1"] and seen[0].queue_s is None
    page = text(svc)
    assert "NaN" not in page and f"{names.PHASE_SECONDS}_sum" in page
    svc.shutdown()
    assert [x.request_id for x in read_records(tmp_path / "records.jsonl").records] == ["r1"]


def test_one_post_takes_at_most_the_span_bound(tmp_path: Path) -> None:
    clock = Clock()
    svc, _ = service(config(tmp_path, otlp={"max_spans_per_request": 100}), clock)
    client = TestClient(svc.app())
    body = spans_body([(f"{i + 1:032x}", phases()) for i in range(10_000)])
    r = client.post(TRACES_PATH, content=body, headers=JSON)
    assert r.status_code == 200 and r.json()["partialSuccess"]["rejectedSpans"] in ("9900", 9900)
    assert svc.joiner is not None and svc.joiner.pending == (0, 100)


def test_a_flood_of_spans_does_not_push_out_the_span_a_record_waits_for(tmp_path: Path) -> None:
    clock = Clock()
    svc, seen = service(config(tmp_path), clock)  # max_pending 10,000 and 2,048 spans a POST
    client = TestClient(svc.app())
    legit = tap(7)
    assert client.post(
        TRACES_PATH, content=spans_body([(legit.trace_id or "", phases())]), headers=JSON
    ).is_success
    for k in range(6):  # 6 x 2,048 flood spans: more than the store holds
        flood = spans_body([(f"{(k + 1) << 64 | i:032x}", phases()) for i in range(2048)])
        assert client.post(TRACES_PATH, content=flood, headers=JSON).is_success
    assert svc.joiner is not None and svc.joiner.pending[1] == 10_000
    svc.submit(legit)
    assert [(x.request_id, x.queue_s) for x in seen] == [("r7", 0.01)]  # joined


def test_fair_eviction_takes_from_the_largest_group_first() -> None:
    joiner = Joiner(wait_s=60.0, max_pending=100)
    span = ServerSpan(f"{1:032x}", 0.01, 0.02, 0.2)
    joiner.add_span(span, 0.0, group=1)
    for g in range(2, 5):
        for i in range(60):
            joiner.add_span(ServerSpan(f"{g << 32 | i:032x}", 0.01, 0.02, 0.2), 0.0, group=g)
    assert joiner.pending[1] == 100 and joiner.stats.orphan_spans == 81
    record = RequestTiming("tap", "t", "l", "c", "m", trace_id=span.trace_id, status=200)
    assert joiner.add_record(record, 1.0)[0].queue_s == 0.01


def test_traces_require_the_ingest_token_when_one_is_set(tmp_path: Path) -> None:
    token = tmp_path / "ingest.token"
    token.write_text("s3cret-token\n")
    svc, _ = service(config(tmp_path, ingest={"token_file": str(token)}), Clock())
    client = TestClient(svc.app())
    body = spans_body([(f"{1:032x}", phases())])
    r = client.post(TRACES_PATH, content=body, headers=JSON)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert "s3cret" not in r.text
    wrong = client.post(TRACES_PATH, content=body, headers={**JSON, "authorization": "Bearer nope"})
    assert wrong.status_code == 401
    ok = client.post(TRACES_PATH, content=body, headers={**JSON, "authorization": "Bearer s3cret-token"})
    assert ok.status_code == 200
    assert svc.joiner is not None and svc.joiner.pending == (0, 1)
