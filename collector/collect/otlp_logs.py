"""OTLP logs in: Envoy's access-log entries, decoded and mapped to records (collect/envoy_log.py).

The logs signal of otlp_wire.py, beside otlp.py's spans: `handle_logs_export` is the OTLP/HTTP
`POST /v1/logs` receiver as a pure function over the body and headers, and `admit_logs` is the
admission both it and the gRPC `LogsService/Export` use. Each log record stands alone: one that
is not an access-log entry (no `duration_us` or `duration_ms` attribute), one whose attributes
the mapping refuses, and those past the per-call bound are left out and counted in the answer's
`partial_success.rejected_log_records`, with the first one's reason; the rest become records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

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
from lanewatch.collector.collect.otlp_wire import (
    Admission,
    ExportResult,
    OtlpError,
    Refusal,
    admit,
    any_value,
    handle_http,
    json_list,
    json_value,
)
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import RequestTiming

__all__ = [
    "LOGS_PATH",
    "LOGS_SERVICE",
    "MAX_LOG_RECORDS",
    "LogsAdmission",
    "admit_logs",
    "decode_logs_json",
    "decode_logs_protobuf",
    "handle_logs_export",
    "logs_response",
]

LOGS_PATH = "/v1/logs"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
MAX_LOG_RECORDS = 2048  # per call, as the span receivers' bound
NOT_ACCESS_LOG = "not an access-log entry (no duration_us or duration_ms attribute)"


LogsAdmission = Admission[RequestTiming]  # the records one call's log records became


def admit_logs(
    entries: Iterable[EnvoyLogEntry], max_records: int | None, default_class: str = DEFAULT_CLASS
) -> LogsAdmission:
    """Each entry mapped to a record or refused alone; at most `max_records` taken."""

    def take(entry: EnvoyLogEntry) -> RequestTiming | Refusal:
        if not is_access_log(entry.attributes):
            return Refusal(NOT_ACCESS_LOG)
        try:
            return record_from_log(entry, default_class)
        except RecordError as exc:
            return Refusal(str(exc))

    return admit(entries, max_records, take, lambda i, _: f"log record {i}", "log records")


def logs_response(admission: LogsAdmission) -> ExportLogsServiceResponse:
    """The OTLP answer: empty, or a partial success counting the refused log records and saying why."""
    answer = ExportLogsServiceResponse()
    if admission.rejected:
        partial = ExportLogsPartialSuccess(
            rejected_log_records=admission.rejected, error_message=admission.reason
        )
        answer.partial_success.CopyFrom(partial)
    return answer


def decode_logs_protobuf(body: bytes) -> list[EnvoyLogEntry]:
    """Every log record in a protobuf ExportLogsServiceRequest, as entries."""
    try:
        req = ExportLogsServiceRequest.FromString(body)
    except DecodeError as exc:
        raise OtlpError(400, f"not an OTLP protobuf ExportLogsServiceRequest: {exc}") from None
    return [
        EnvoyLogEntry(
            {kv.key: any_value(kv.value) for kv in lr.attributes},
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
        scopes = [sl for rl in json_list(doc, "resourceLogs") for sl in json_list(rl, "scopeLogs")]
        return [_json_entry(lr) for sl in scopes for lr in json_list(sl, "logRecords")]
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        raise OtlpError(400, f"not an OTLP JSON ExportLogsServiceRequest: {exc!r}") from None


def _json_entry(lr: object) -> EnvoyLogEntry:
    if not isinstance(lr, dict):
        raise TypeError("a log record must be an object")
    attrs = {a["key"]: json_value(a.get("value") or {}) for a in lr.get("attributes") or ()}
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
) -> ExportResult[RequestTiming]:
    """Answer one OTLP/HTTP logs request: 200 with its records (refused ones counted), 400, 413, 415."""
    return handle_http(
        body,
        content_type,
        content_encoding,
        max_body_bytes,
        lambda raw, as_json: decode_logs_json(raw) if as_json else decode_logs_protobuf(raw),
        lambda entries: admit_logs(entries, max_records, default_class),
        logs_response,
    )
