"""One ingest path for spans and records on the collector's app: refused spans are counted and never
reach a record, a span never turns POST /v1/records into a 500, and a batch sent again is acknowledged
without being counted twice."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from lanewatch.collector.collect.otlp import decode_json, decode_protobuf
from lanewatch.collector.collect.otlp_http import TRACES_PATH
from lanewatch.collector.collect.records_http import RECORDS_PATH
from lanewatch.collector.record.batch import encode_batch, encode_record
from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.files import read_records
from lanewatch.exporters import names
from tests.unit.collector.collect.test_otlp import protobuf_body, sdk_spans
from tests.unit.collector.record.test_batch import tap

from .test_service import Clock, config, service, text
from .test_traces_hardening import phases, spans_body

JSON = {"content-type": "application/json"}


def sample(svc: object, name: str, **labels: str) -> float:
    """One sample's value from the service's exposition (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text(svc)):  # type: ignore[arg-type]
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


def test_a_nan_span_that_reached_the_join_never_makes_the_records_post_fail(tmp_path: Path) -> None:
    svc, seen = service(config(tmp_path), Clock())
    client = TestClient(svc.app(), raise_server_exceptions=False)
    first = tap(1)
    svc.receive_spans([ServerSpan(first.trace_id or "", float("nan"), 0.02, 0.2)])  # past any receiver
    r = client.post(
        RECORDS_PATH, content=encode_batch([encode_record(first), encode_record(tap(2))]), headers=JSON
    )
    assert r.status_code == 200 and r.json()["accepted"] == 2
    assert sample(svc, names.OTLP_SPANS_REFUSED_TOTAL, reason="invalid") == 1
    svc.shutdown()
    records = read_records(tmp_path / "records.jsonl").records
    assert sorted(r.request_id or "" for r in records) == ["r1", "r2"]  # none lost, none joined to NaN
    assert all(r.queue_s is None for r in records) and len(seen) == 2


def test_refused_spans_over_http_are_counted_by_reason(tmp_path: Path) -> None:
    svc, _ = service(config(tmp_path, otlp={"max_spans_per_request": 2}), Clock())
    client = TestClient(svc.app())
    body = spans_body(
        [(f"{i + 1:032x}", phases(queue=q)) for i, q in enumerate(["NaN", -1.0, 0.1, 0.1, 0.1])]
    )
    assert client.post(TRACES_PATH, content=body, headers=JSON).json()["partialSuccess"]["rejectedSpans"] in (
        3,
        "3",
    )
    assert sample(svc, names.OTLP_SPANS_REFUSED_TOTAL, reason="invalid") == 2
    assert sample(svc, names.OTLP_SPANS_REFUSED_TOTAL, reason="limit") == 1
    assert sample(svc, names.OTLP_SPANS_RECEIVED_TOTAL) == 2


def test_a_batch_sent_again_is_acknowledged_per_record_and_counted_once(tmp_path: Path) -> None:
    svc, seen = service(config(tmp_path), Clock())
    client = TestClient(svc.app())
    records = [tap(i, status=500, trace_id=None) for i in range(20)]
    body = encode_batch(encode_record(r, with_id=True) for r in records)
    assert client.post(RECORDS_PATH, content=body, headers=JSON).json()["duplicates"] == 0
    again = client.post(RECORDS_PATH, content=body, headers=JSON).json()  # the answer was lost: a retry
    assert (again["accepted"], again["duplicates"], again["refused_count"]) == (20, 20, 0)
    mixed = encode_batch(
        [encode_record(records[0], with_id=True), encode_record(tap(99, status=500), with_id=True)]
    )
    assert client.post(RECORDS_PATH, content=mixed, headers=JSON).json()["duplicates"] == 1
    assert len(seen) == 21 and sample(svc, names.REQUESTS_TOTAL, lane="fast") == 21


def test_a_record_id_is_the_same_for_the_same_record_and_stays_out_of_the_record() -> None:
    a, b = encode_record(tap(1), with_id=True), encode_record(tap(2), with_id=True)
    assert (
        a == encode_record(tap(1), with_id=True) and json.loads(a)["record_id"] != json.loads(b)["record_id"]
    )
    assert encode_record(tap(1)) == a[: a.rindex(b',"record_id"')] + b"}"


def test_spans_carry_their_sender_and_parent_span_from_either_encoding() -> None:
    (sdk,) = sdk_spans(1)
    (from_pb,) = decode_protobuf(protobuf_body([sdk]), peer="10.0.0.5")
    assert from_pb.sender.startswith("10.0.0.5/unknown_service") and from_pb.parent_span_id is None
    doc = json.loads(spans_body([(f"{1:032x}", phases())]))
    doc["resourceSpans"][0]["resource"] = {
        "attributes": [{"key": "service.name", "value": {"stringValue": "vllm"}}]
    }
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["parentSpanId"] = "00F067AA0BA902B7"
    (from_json,) = decode_json(json.dumps(doc).encode(), peer="10.0.0.6")
    assert (from_json.sender, from_json.parent_span_id) == ("10.0.0.6/vllm", "00f067aa0ba902b7")


def test_recent_ids_keep_the_newest_within_their_bound() -> None:
    from lanewatch.collector.record.recent_ids import RecentIds

    recent = RecentIds(3)
    for rid in ("a", "b", "c", "a", "d"):  # "a" again: now the newest
        recent.add(rid)
    assert len(recent) == 3 and "a" in recent and "b" not in recent and "d" in recent
    off = RecentIds(0)
    off.add("a")
    assert "a" not in off and len(off) == 0


def test_a_resent_batch_is_taken_again_when_ids_are_off(tmp_path: Path) -> None:
    svc, seen = service(config(tmp_path, ingest={"recent_record_ids": 0}), Clock())
    client = TestClient(svc.app())
    body = encode_batch([encode_record(tap(1, status=500), with_id=True)])
    for _ in range(2):
        assert client.post(RECORDS_PATH, content=body, headers=JSON).json()["duplicates"] == 0
    assert len(seen) == 2
