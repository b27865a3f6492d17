"""OTLP logs in (Envoy's access log): POST /v1/logs on the collector's app, and the gRPC decision.

The same auth, limits and per-record refusal as the span path: a bad log record is refused alone
and counted in `partial_success.rejected_log_records`; the others become records of source `envoy`.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import grpc
from fastapi.testclient import TestClient
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

from lanewatch.collector.collect.envoy_log import EnvoyLogEntry
from lanewatch.collector.collect.otlp_grpc import handle_grpc_logs
from lanewatch.collector.collect.otlp_logs import LOGS_PATH, decode_logs_json, handle_logs_export
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.exporters import names
from tests.unit.collector.collect.test_envoy_log import ENTRY, PARENT, TRACE

from .test_service import Clock, config, service
from .test_span_ingest import sample

PROTOBUF = {"content-type": "application/x-protobuf"}
TOKEN = "logs-ingest-token"
RECENT_NS = time.time_ns() - 60 * 10**9  # a start the receivers take: a minute before the test


def log_record(**changes: Any) -> LogRecord:
    attrs = {**ENTRY, **changes}
    return LogRecord(
        time_unix_nano=RECENT_NS,
        attributes=[
            KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attrs.items() if v is not None
        ],
        trace_id=bytes.fromhex(TRACE),
        span_id=bytes.fromhex(PARENT),
    )


def logs_body(records: list[LogRecord]) -> bytes:
    request = ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=records)])]
    )
    encoded: bytes = request.SerializeToString()
    return encoded


def good(n: int) -> list[LogRecord]:
    return [log_record(request_id=f"env-{i}", response_code="503", response_flags="UF") for i in range(n)]


def test_protobuf_log_records_become_envoy_records() -> None:
    result = handle_logs_export(logs_body(good(3)), "application/x-protobuf", None, 1 << 20)
    assert result.status == 200 and not ExportLogsServiceResponse.FromString(result.body).HasField(
        "partial_success"
    )
    records = result.admission.kept
    assert [r.request_id for r in records] == ["env-0", "env-1", "env-2"]
    assert all(r.source == "envoy" and r.lane == "fast" and r.status == 503 for r in records)


def test_one_bad_log_record_is_refused_alone_with_a_partial_success() -> None:
    body = logs_body(
        [*good(2), log_record(ttft_us="-7"), LogRecord(body=AnyValue(string_value="hello")), *good(1)]
    )
    result = handle_logs_export(body, "application/x-protobuf", None, 1 << 20)
    assert result.status == 200 and len(result.admission.kept) == 3
    answer = ExportLogsServiceResponse.FromString(result.body)
    assert answer.partial_success.rejected_log_records == 2
    assert "log record 2" in answer.partial_success.error_message
    assert "ttft_us" in answer.partial_success.error_message


def test_one_call_takes_at_most_the_bound() -> None:
    result = handle_logs_export(logs_body(good(5)), "application/x-protobuf", None, 1 << 20, max_records=3)
    assert len(result.admission.kept) == 3 and result.admission.over_limit == 2
    assert ExportLogsServiceResponse.FromString(result.body).partial_success.rejected_log_records == 2


def test_json_and_gzip_are_taken_and_bad_bodies_are_400_413_415() -> None:
    doc = MessageToDict(ExportLogsServiceRequest.FromString(logs_body(good(2))))
    for lr in doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:
        lr["traceId"], lr["spanId"] = TRACE, PARENT  # OTLP JSON ids are hex
    raw = json.dumps(doc).encode()
    assert [r.trace_id for r in decode_logs_json(raw) if isinstance(r, EnvoyLogEntry)] == [TRACE, TRACE]
    as_json = handle_logs_export(raw, "application/json", None, 1 << 20)
    assert as_json.status == 200 and len(as_json.admission.kept) == 2
    assert as_json.admission.kept[0].span_id == PARENT
    zipped = handle_logs_export(gzip.compress(logs_body(good(2))), "application/x-protobuf", "gzip", 1 << 20)
    assert zipped.status == 200 and len(zipped.admission.kept) == 2
    assert handle_logs_export(b"\x0a\xff\xff", "application/x-protobuf", None, 1 << 20).status == 400
    assert handle_logs_export(b'{"resourceLogs": 3}', "application/json", None, 1 << 20).status == 400
    assert handle_logs_export(logs_body(good(9)), "application/x-protobuf", None, 1024).status == 413
    assert handle_logs_export(b"x", "text/plain", None, 1 << 20).status == 415


def json_records(records: list[LogRecord]) -> list[dict[str, Any]]:
    """The log records as OTLP JSON writes them (hex ids)."""
    doc = MessageToDict(ExportLogsServiceRequest.FromString(logs_body(records)))
    out: list[dict[str, Any]] = doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    for lr in out:
        lr["traceId"], lr["spanId"] = TRACE, PARENT
    return out


def json_body(records: list[Any]) -> bytes:
    return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}).encode()


def test_a_json_log_record_of_the_wrong_shape_is_refused_alone_as_protobuf_refuses_one() -> None:
    g = json_records(good(4))
    bad: list[Any] = [
        "not an object",
        {**g[0], "attributes": [{"value": {"stringValue": "no key"}}]},
        {**g[0], "attributes": {"duration_us": "5"}},
        {**g[0], "attributes": [{"key": "duration_us", "value": 5}]},
        {**g[0], "timeUnixNano": "soon"},
        {**g[0], "timeUnixNano": 1.5},
    ]
    body = json_body([g[0], *bad[:3], g[1], *bad[3:], g[2], {**g[3], "timeUnixNano": 1.796e18}])
    result = handle_logs_export(body, "application/json", None, 1 << 20)
    assert result.status == 200 and result.media_type == "application/json"
    assert [r.request_id for r in result.admission.kept] == ["env-0", "env-1", "env-2", "env-3"]
    assert result.admission.invalid == len(bad) == result.admission.rejected
    partial = json.loads(result.body)["partialSuccess"]
    assert partial["rejectedLogRecords"] == str(len(bad))  # int64: a string in OTLP JSON
    assert partial["errorMessage"] == "log record 1: not an OTLP JSON log record: not an object"
    # the mapping's refusal reads alike whichever encoding carried the record
    mapped = json_body([*json_records([log_record(ttft_us="-7")]), g[0]])
    as_json = handle_logs_export(mapped, "application/json", None, 1 << 20)
    as_pb = handle_logs_export(
        logs_body([log_record(ttft_us="-7"), *good(1)]), PROTOBUF["content-type"], None, 1 << 20
    )
    assert as_json.admission.reason == as_pb.admission.reason and "ttft_us" in as_json.admission.reason
    assert len(as_json.admission.kept) == len(as_pb.admission.kept) == 1


def test_a_json_body_that_is_no_logs_request_is_a_400_naming_why() -> None:
    for body, why in (
        (b"{not json", "not JSON"),
        (b"[]", "expected an object holding 'resourceLogs'"),
        (b'{"resourceLogs": 3}', "'resourceLogs' must be a list"),
        (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": {"a": 1}}]}]}', "'logRecords' must be a list"),
    ):
        result = handle_logs_export(body, "application/json", None, 1 << 20)
        assert result.status == 400 and not result.admission.kept
        assert why in json.loads(result.body)["message"]
    big = handle_logs_export(json_body(json_records(good(40))), "application/json", None, 1024)
    assert big.status == 413 and "larger than 1024 bytes" in json.loads(big.body)["message"]


def test_the_app_counts_a_refused_json_log_record_and_keeps_the_rest(tmp_path: Path) -> None:
    svc, seen = token_service(tmp_path)
    auth = {"content-type": "application/json", "authorization": f"Bearer {TOKEN}"}
    g = json_records(good(2))
    body = json_body([g[0], {**g[0], "timeUnixNano": "soon"}, g[1]])
    answer = TestClient(svc.app()).post(LOGS_PATH, content=body, headers=auth)
    assert answer.status_code == 200 and answer.json()["partialSuccess"]["rejectedLogRecords"] == "1"
    assert [r.request_id for r in seen] == ["env-0", "env-1"]
    assert sample(svc, names.OTLP_LOG_RECORDS_REFUSED_TOTAL) == 1
    assert sample(svc, names.OTLP_LOG_RECORDS_RECEIVED_TOTAL) == 2
    svc.shutdown()


def test_grpc_decision_matches_http() -> None:
    body = logs_body([*good(2), log_record(response_code="9999")])
    result = handle_grpc_logs(body, 1 << 20)
    assert result.code is grpc.StatusCode.OK and len(result.kept) == 2 and result.admission.invalid == 1
    answer = ExportLogsServiceResponse.FromString(result.body)
    assert answer.partial_success.rejected_log_records == 1
    assert "response_code" in answer.partial_success.error_message
    assert handle_grpc_logs(b"\x0a\xff\xff", 1 << 20).code is grpc.StatusCode.INVALID_ARGUMENT
    assert handle_grpc_logs(body, len(body) - 1).code is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_absurd_entries_are_refused_alone_over_http_json_and_grpc(tmp_path: Path) -> None:
    absurd = [
        log_record(duration_us="1e297"),
        log_record(ttft_us=None, ttft_ms="5000000", duration_ms="1"),
        LogRecord(time_unix_nano=16_725_225_600 * 10**9, attributes=log_record().attributes),  # year 2500
    ]
    records = [*good(1), *absurd, *good(2)[1:]]
    now = time.time()
    pb = handle_logs_export(logs_body(records), PROTOBUF["content-type"], None, 1 << 20, received_at=now)
    as_json = handle_logs_export(
        json_body(json_records(records)), "application/json", None, 1 << 20, received_at=now
    )
    grpc_result = handle_grpc_logs(logs_body(records), 1 << 20, received_at=now)
    for admission in (pb.admission, as_json.admission, grpc_result.admission):
        assert [r.request_id for r in admission.kept] == ["env-0", "env-1"]
        assert admission.invalid == 3 and "log record 1: field 'e2e_s'" in admission.reason
    svc, seen = token_service(tmp_path)
    auth = {**PROTOBUF, "authorization": f"Bearer {TOKEN}"}
    answer = TestClient(svc.app()).post(LOGS_PATH, content=logs_body(records), headers=auth)
    assert ExportLogsServiceResponse.FromString(answer.content).partial_success.rejected_log_records == 3
    assert [r.request_id for r in seen] == ["env-0", "env-1"]  # failed requests: no span to wait for
    assert sample(svc, names.OTLP_LOG_RECORDS_REFUSED_TOTAL) == 3
    svc.shutdown()


def token_service(tmp_path: Path, **otlp: Any) -> tuple[CollectorService, list[RequestTiming]]:
    (tmp_path / "token").write_text(TOKEN + "\n")
    cfg = config(tmp_path, ingest={"token_file": str(tmp_path / "token")}, otlp={"join_wait_s": 2.0, **otlp})
    return service(cfg, Clock())


def test_the_collector_app_takes_logs_only_with_the_ingest_token(tmp_path: Path) -> None:
    svc, seen = token_service(tmp_path)
    client = TestClient(svc.app())
    refused = client.post(LOGS_PATH, content=logs_body(good(2)), headers=PROTOBUF)
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    wrong = client.post(
        LOGS_PATH, content=logs_body(good(2)), headers={**PROTOBUF, "authorization": "Bearer no"}
    )
    assert wrong.status_code == 401 and seen == []
    auth = {**PROTOBUF, "authorization": f"Bearer {TOKEN}"}
    body = logs_body([*good(2), log_record(upstream_cluster="bad lane!")])
    ok = client.post(LOGS_PATH, content=body, headers=auth)
    assert ok.status_code == 200
    assert ExportLogsServiceResponse.FromString(ok.content).partial_success.rejected_log_records == 1
    assert [r.request_id for r in seen] == ["env-0", "env-1"]  # failed requests: no span to wait for
    assert sample(svc, names.OTLP_LOG_RECORDS_REFUSED_TOTAL) == 1
    assert sample(svc, names.OTLP_LOG_RECORDS_RECEIVED_TOTAL) == 2
    svc.shutdown()


def test_a_log_record_of_a_200_waits_for_its_span_like_the_taps(tmp_path: Path) -> None:
    from lanewatch.collector.record.evidence import ServerSpan

    svc, seen = token_service(tmp_path)
    auth = {**PROTOBUF, "authorization": f"Bearer {TOKEN}"}
    assert (
        TestClient(svc.app()).post(LOGS_PATH, content=logs_body([log_record()]), headers=auth).status_code
        == 200
    )
    assert seen == []
    span = ServerSpan(TRACE, 0.01, 0.02, 0.3, prompt_tokens=12, completion_tokens=40, parent_span_id=PARENT)
    svc.receive_spans([span])
    [joined] = seen
    assert (joined.queue_s, joined.prefill_s, joined.decode_s) == (0.01, 0.02, 0.3)
    assert (joined.output_tokens, joined.prompt_tokens, joined.tokens_from_usage) == (40, 12, True)
    svc.shutdown()


def test_logs_can_be_turned_off(tmp_path: Path) -> None:
    svc, _ = service(config(tmp_path, otlp={"logs": False}), Clock())
    assert (
        TestClient(svc.app()).post(LOGS_PATH, content=logs_body(good(1)), headers=PROTOBUF).status_code == 404
    )
    svc.shutdown()


def test_polls_that_are_not_inference_are_refused_and_inference_routes_kept() -> None:
    from lanewatch.collector.collect.envoy_log import NOT_INFERENCE, EnvoyLogEntry
    from lanewatch.collector.collect.otlp_logs import admit_logs

    base = {"upstream_cluster": "fast", "response_code": "200", "ttft_us": "3000", "duration_ms": "4"}
    paths = ["/v1/models", "/health", "/v1/chat/completions", "/v1/completions?x=1", None]
    entries = [EnvoyLogEntry({**base, **({"path": p} if p else {})}, 1) for p in paths]
    got = admit_logs(entries, None)
    assert [r.api for r in got.kept] == ["chat", "completions", "chat"]
    assert got.invalid == 2 and NOT_INFERENCE in got.reason
