"""Numbers no request could have, at the collector's ingest edges: each record refused alone naming
the field and counted, never a 500, never a counter moved by it; a batch is applied whole or not at
all, a record the collector fails to apply listed as refused and the rest taken. Envoy's records
take their token counts from vLLM's span: a span with a count past the bound is refused too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from lanewatch.collector.collect.otlp import ATTR_COMPLETION_TOKENS, ATTR_DECODE, ATTR_PREFILL, ATTR_QUEUE
from lanewatch.collector.collect.otlp_http import TRACES_PATH
from lanewatch.collector.collect.otlp_logs import LOGS_PATH
from lanewatch.collector.collect.records_http import RECORDS_PATH, apply_batch, records_endpoint
from lanewatch.collector.record.batch import parse_batch
from lanewatch.collector.record.recent_ids import RecentIds
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.exporters import names
from tests.unit.collector.collect.test_envoy_log import PARENT, TRACE
from tests.unit.collector.collect.test_otlp_logs import PROTOBUF, log_record, logs_body
from tests.unit.collector.record.test_batch import tap

from .test_service import Clock, config, service, text

JSON = {"content-type": "application/json"}


def total(svc: object, name: str) -> float:
    """The sum of a family's samples named `name` over every label set (0 when there is none)."""
    from prometheus_client.parser import text_string_to_metric_families

    out = 0.0
    for family in text_string_to_metric_families(text(svc)):  # type: ignore[arg-type]
        out += sum(float(s.value) for s in family.samples if s.name == name)
    return out


def wire(i: int, **changes: Any) -> dict[str, Any]:
    """tap(i) as a batch item, without a trace id: it passes the join at once."""
    return {**tap(i, trace_id=None).to_json(), **changes}


def post(client: TestClient, *items: dict[str, Any]) -> Any:
    return client.post(RECORDS_PATH, content=json.dumps({"records": list(items)}), headers=JSON)


def test_a_token_count_past_the_bound_is_refused_and_moves_no_counter(tmp_path: Path) -> None:
    svc, seen = service(config(tmp_path), Clock())
    client = TestClient(svc.app(), raise_server_exceptions=False)
    assert post(client, *(wire(i) for i in range(10))).json()["accepted"] == 10  # 7 + 4 tokens each
    assert total(svc, names.TOKENS_TOTAL) == 110
    huge = post(client, wire(10, output_tokens=2**63 - 1, prompt_tokens=2**63 - 1))
    assert huge.status_code == 200
    answer = huge.json()
    assert (answer["accepted"], answer["refused_count"]) == (0, 1)
    assert [(r["index"], r["field"]) for r in answer["refused"]] == [(0, "prompt_tokens")]
    past_int64 = post(client, wire(11, output_tokens=2**64 + 5)).json()
    assert [(r["index"], r["field"]) for r in past_int64["refused"]] == [(0, "output_tokens")]
    assert total(svc, names.TOKENS_TOTAL) == 110  # unchanged
    assert total(svc, names.INGEST_RECORDS_REFUSED_TOTAL) == 2
    assert len(seen) == 10
    svc.shutdown()


def test_a_batch_with_an_integer_no_float_holds_takes_the_others_and_answers_200(tmp_path: Path) -> None:
    svc, _ = service(config(tmp_path), Clock())
    client = TestClient(svc.app(), raise_server_exceptions=False)
    post(client, wire(0), wire(1), wire(2), wire(3))
    assert total(svc, names.REQUESTS_TOTAL) == 4
    r = post(client, wire(4), wire(5, output_tokens=10**400), wire(6))
    assert r.status_code == 200
    answer = r.json()
    assert (answer["accepted"], answer["refused_count"]) == (2, 1)
    assert [(x["index"], x["field"]) for x in answer["refused"]] == [(1, "output_tokens")]
    assert total(svc, names.REQUESTS_TOTAL) == 6  # exactly the two good ones
    assert total(svc, names.INGEST_RECORDS_REFUSED_TOTAL) == 1
    svc.shutdown()


def endpoint_client(receive: Any) -> TestClient:
    app = FastAPI()
    app.add_api_route(RECORDS_PATH, records_endpoint(1 << 20, 100, None, receive), methods=["POST"])
    return TestClient(app)


def test_a_record_the_collector_fails_to_apply_is_refused_alone_and_the_rest_are_taken() -> None:
    taken: list[str | None] = []

    def receive(records: list[RequestTiming]) -> None:
        for record in records:
            if record.request_id == "r1":
                raise RuntimeError("a fault of the collector's")
            taken.append(record.request_id)

    client = endpoint_client(receive)
    r = post(client, wire(0), wire(1), wire(2, output_tokens=-1), wire(3))
    assert r.status_code == 200
    answer = r.json()
    assert answer["accepted"] == 2 and answer["refused_count"] == 2
    assert [(x["index"], x["field"]) for x in answer["refused"]] == [(1, None), (2, "output_tokens")]
    assert "not applied" in answer["refused"][0]["reason"]
    assert taken == ["r0", "r3"]
    # Nothing of a batch applied: 500, so a sender may send it again and nothing counts twice.
    only_bad = post(client, wire(1))
    assert only_bad.status_code == 500 and taken == ["r0", "r3"]


def test_apply_batch_remembers_only_the_ids_of_records_taken() -> None:
    items = [{**wire(i), "record_id": f"id{i}"} for i in range(3)]
    batch = parse_batch(json.dumps({"records": items}).encode())
    recent = RecentIds(10)

    def receive(records: list[RequestTiming]) -> None:
        if records[0].request_id == "r1":
            raise ValueError("no")

    applied = apply_batch(batch, recent, receive)
    assert (applied.taken, applied.duplicates, [f.index for f in applied.failed]) == (2, 0, [1])
    again = apply_batch(batch, recent, lambda records: None)
    assert (again.taken, again.duplicates, again.failed) == (1, 2, [])  # the failed one is taken now


def span_body(trace: str, tokens: dict[str, Any]) -> bytes:
    """An OTLP JSON llm_request span under Envoy's span PARENT, with token counts as `intValue`s."""
    times = {ATTR_QUEUE: 0.01, ATTR_PREFILL: 0.02, ATTR_DECODE: 0.2}
    attributes = [{"key": k, "value": {"doubleValue": v}} for k, v in times.items()]
    attributes += [{"key": k, "value": {"intValue": v}} for k, v in tokens.items()]
    span = {"traceId": trace, "spanId": "12" * 8, "parentSpanId": PARENT, "name": "llm_request"}
    return json.dumps(
        {"resourceSpans": [{"scopeSpans": [{"spans": [{**span, "attributes": attributes}]}]}]}
    ).encode()


def test_an_envoy_record_takes_no_token_count_past_the_bound_from_its_span(tmp_path: Path) -> None:
    clock = Clock()
    svc, seen = service(config(tmp_path), clock)
    client = TestClient(svc.app(), raise_server_exceptions=False)
    other = "5" * 32
    entries = [
        log_record(request_id="env-0"),
        log_record(request_id="env-1", traceparent=f"00-{other}-{PARENT}-01"),
    ]
    logs = client.post(LOGS_PATH, content=logs_body(entries), headers=PROTOBUF)
    assert logs.status_code == 200
    assert not ExportLogsServiceResponse.FromString(logs.content).HasField("partial_success")
    assert seen == []  # 200s with a trace: each waits for its vLLM span
    for trace, tokens in ((TRACE, str(2**63 - 1)), (other, 10**400)):  # OTLP JSON's string, and a number
        r = client.post(TRACES_PATH, content=span_body(trace, {ATTR_COMPLETION_TOKENS: tokens}), headers=JSON)
        assert r.status_code == 200
        partial = r.json()["partialSuccess"]
        assert partial["rejectedSpans"] in (1, "1") and "completion_tokens" in partial["errorMessage"]
    clock.now += 2.5
    svc.expire()
    assert sorted((r.request_id, r.output_tokens) for r in seen) == [("env-0", None), ("env-1", None)]
    assert total(svc, names.REQUESTS_TOTAL) == 2
    assert total(svc, names.TOKENS_TOTAL) == 0
    svc.shutdown()
