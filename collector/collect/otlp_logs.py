"""OTLP logs in: Envoy's access-log entries, decoded and mapped to records (collect/envoy_log.py).

The logs twin of otlp.py: `handle_logs_export` is the OTLP/HTTP `POST /v1/logs` receiver as a
pure function over the body and headers (protobuf `ExportLogsServiceRequest` or OTLP JSON,
optionally gzip), and `admit_logs` is the admission both it and the gRPC `LogsService/Export`
use. Each log record stands alone: one that is not an access-log entry (no `duration_us` or
`duration_ms` attribute), one whose attributes the mapping refuses, and those past the per-call
bound are left out and counted in the answer's `partial_success.rejected_log_records`, with the
first one's reason; the rest become records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from lanewatch.collector.collect.envoy_log import (
    DEFAULT_CLASS,
    EnvoyLogEntry,
    is_access_log,
    record_from_log,
)
from lanewatch.collector.collect.otlp import (
    JSON,
    PROTOBUF,
    ExportResult,
    OtlpError,
    _any_value,
    _decompress,
    _error,
    _json_list,
    _json_value,
)
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import RequestTiming

__all__ = [
    "LOGS_PATH",
    "LOGS_SERVICE",
    "MAX_LOG_RECORDS",
    "LogsAdmission",
    "LogsResult",
    "admit_logs",
    "decode_logs_json",
    "decode_logs_protobuf",
    "handle_logs_export",
]

LOGS_PATH = "/v1/logs"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
MAX_LOG_RECORDS = 2048  # per call, as the span receivers' bound
NOT_ACCESS_LOG = "not an access-log entry (no duration_us or duration_ms attribute)"


@dataclass(frozen=True, slots=True)
class LogsAdmission:
    """The records one call's log records became, and how many were refused."""

    records: list[RequestTiming] = field(default_factory=list)
    invalid: int = 0  # not an access-log entry, or an attribute the mapping refuses
    over_limit: int = 0
    reason: str = ""  # why the first refused log record was

    @property
    def rejected(self) -> int:
        """Log records refused in all."""
        return self.invalid + self.over_limit

    def response(self) -> ExportLogsServiceResponse:
        """The OTLP answer: empty, or a partial success counting the refused log records and saying why."""
        answer = ExportLogsServiceResponse()
        if self.rejected:
            partial = ExportLogsPartialSuccess(rejected_log_records=self.rejected, error_message=self.reason)
            answer.partial_success.CopyFrom(partial)
        return answer


@dataclass(frozen=True, slots=True)
class LogsResult:
    """What to answer a POST /v1/logs with, and the records it carried."""

    status: int
    media_type: str
    body: bytes
    admission: LogsAdmission = field(default_factory=LogsAdmission)


def admit_logs(
    entries: Iterable[EnvoyLogEntry], max_records: int | None, default_class: str = DEFAULT_CLASS
) -> LogsAdmission:
    """Each entry mapped to a record or refused alone; at most `max_records` taken."""
    kept: list[RequestTiming] = []
    invalid = over = 0
    why = ""
    for i, entry in enumerate(entries):
        problem = None
        if max_records is not None and len(kept) >= max_records:
            problem, over = f"more than {max_records} log records in one request", over + 1
        elif not is_access_log(entry.attributes):
            problem, invalid = NOT_ACCESS_LOG, invalid + 1
        else:
            try:
                kept.append(record_from_log(entry, default_class))
                continue
            except RecordError as exc:
                problem, invalid = str(exc), invalid + 1
        why = why or f"log record {i}: {problem}"
    return LogsAdmission(kept, invalid, over, why)


def decode_logs_protobuf(body: bytes) -> list[EnvoyLogEntry]:
    """Every log record in a protobuf ExportLogsServiceRequest, as entries."""
    try:
        req = ExportLogsServiceRequest.FromString(body)
    except DecodeError as exc:
        raise OtlpError(400, f"not an OTLP protobuf ExportLogsServiceRequest: {exc}") from None
    return [
        EnvoyLogEntry(
            {kv.key: _any_value(kv.value) for kv in lr.attributes},
            lr.time_unix_nano,
            lr.trace_id.hex(),
            lr.span_id.hex(),
        )
        for rl in req.resource_logs
        for sl in rl.scope_logs
        for lr in sl.log_records
    ]


def decode_logs_json(body: bytes) -> list[EnvoyLogEntry]:
    """Every log record in an OTLP JSON logs request (hex ids, camelCase keys), as entries."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise OtlpError(400, f"not JSON: {str(exc)[:200]}") from None
    try:
        scopes = [sl for rl in _json_list(doc, "resourceLogs") for sl in _json_list(rl, "scopeLogs")]
        return [_json_entry(lr) for sl in scopes for lr in _json_list(sl, "logRecords")]
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        raise OtlpError(400, f"not an OTLP JSON ExportLogsServiceRequest: {exc!r}") from None


def _json_entry(lr: object) -> EnvoyLogEntry:
    if not isinstance(lr, dict):
        raise TypeError("a log record must be an object")
    attrs = {a["key"]: _json_value(a.get("value") or {}) for a in lr.get("attributes") or ()}
    ids = [lr.get(k) for k in ("traceId", "spanId")]
    trace_id, span_id = (v if isinstance(v, str) else "" for v in ids)
    return EnvoyLogEntry(attrs, int(lr.get("timeUnixNano") or 0), trace_id, span_id)


def handle_logs_export(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None,
    max_body_bytes: int,
    max_records: int | None = MAX_LOG_RECORDS,
    default_class: str = DEFAULT_CLASS,
) -> LogsResult:
    """Answer one OTLP/HTTP logs request: 200 with its records (refused ones counted), 400, 413, 415."""
    media = (content_type or "").split(";")[0].strip().lower()
    as_json = media == JSON
    try:
        if media not in (PROTOBUF, JSON):
            raise OtlpError(415, f"Content-Type must be {PROTOBUF} or {JSON}, got {media or 'none'}")
        raw = _decompress(body, content_encoding, max_body_bytes)
        entries = decode_logs_json(raw) if as_json else decode_logs_protobuf(raw)
    except OtlpError as exc:
        return _as_logs(_error(exc, as_json))
    admission = admit_logs(entries, max_records, default_class)
    answer = admission.response()
    if as_json:
        return LogsResult(200, JSON, json.dumps(MessageToDict(answer)).encode(), admission)
    return LogsResult(200, PROTOBUF, answer.SerializeToString(), admission)


def _as_logs(result: ExportResult) -> LogsResult:
    return LogsResult(result.status, result.media_type, result.body)
