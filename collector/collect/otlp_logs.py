"""OTLP logs in: Envoy's access-log entries, decoded and mapped to records (collect/envoy_log.py).

The logs signal of otlp_wire.py, beside otlp.py's spans: `handle_logs_export` is the OTLP/HTTP
`POST /v1/logs` receiver as a pure function over the body and headers, and `admit_logs` is the
admission both it and the gRPC `LogsService/Export` use. Each log record stands alone: one that
is not an access-log entry (no `duration_us` or `duration_ms` attribute), one whose attributes
the mapping refuses, and those past the per-call bound are left out and counted in the answer's
`partial_success.rejected_log_records`, with the first one's reason; the rest become records,
but for Envoy's periodic entries of streams still under way (`access_log_type`
`DownstreamPeriodic`), which become the fast guard's progress events (`LogsAdmitted.progress`).
Protobuf and JSON differ only in decoding: an OTLP JSON log record that is not one (not an
object, an attribute without a string key, a time that is no whole number) decodes to a
`Refusal`, which the one admission counts as it counts a record the mapping refuses. Only a body
that is no ExportLogsServiceRequest at all (not JSON, `resourceLogs`, `scopeLogs` or `logRecords`
not lists) is a 400.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

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
    is_periodic,
    progress_from_log,
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
from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import RequestTiming

__all__ = [
    "LOGS_PATH",
    "LOGS_SERVICE",
    "MAX_LOG_RECORDS",
    "LogItem",
    "LogsAdmission",
    "LogsAdmitted",
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
NOT_JSON_LOG_RECORD = "not an OTLP JSON log record"
MAX_NANOS_DIGITS = 20  # a uint64's; a longer timeUnixNano is no time
_UINT64 = 1 << 64


LogsAdmission = Admission[RequestTiming]  # the records one call's log records became
# One log record as decoded: an entry, or why it is none (a JSON record of the wrong shape)
LogItem = EnvoyLogEntry | Refusal


@dataclass(frozen=True, slots=True)
class LogsAdmitted(Admission[RequestTiming]):
    """A logs call's records (`kept`), and the progress events its periodic entries became."""

    progress: list[Progress] = field(default_factory=list)  # reporter envoy_log.REPORTER


def admit_logs(
    entries: Iterable[LogItem],
    max_records: int | None,
    default_class: str = DEFAULT_CLASS,
    received_at: float | None = None,
) -> LogsAdmitted:
    """Each entry mapped to a record, or to a progress event when periodic, or refused alone (a
    decoder's Refusal too); at most `max_records` log records taken in all."""

    def take(entry: LogItem) -> RequestTiming | Progress | Refusal | None:
        if isinstance(entry, Refusal):
            return entry
        if not is_access_log(entry.attributes):
            return Refusal(NOT_ACCESS_LOG)
        try:
            if is_periodic(entry.attributes):  # None: taken, but nothing for the guard (an upload, no stream)
                return progress_from_log(entry)
            return record_from_log(entry, default_class, received_at)
        except RecordError as exc:
            return Refusal(str(exc))

    got = admit(entries, max_records, take, lambda i, _: f"log record {i}", "log records")
    records = [r for r in got.kept if isinstance(r, RequestTiming)]
    progress = [p for p in got.kept if isinstance(p, Progress)]
    return LogsAdmitted(records, got.invalid, got.over_limit, got.reason, progress)


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


def decode_logs_json(body: bytes) -> list[LogItem]:
    """Every log record in an OTLP JSON logs request (hex ids, camelCase keys): an entry, or a
    Refusal for one that is no log record; OtlpError (400) for a body that is no such request."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise OtlpError(400, f"not JSON: {str(exc)[:200]}") from None
    try:
        scopes = [sl for rl in json_list(doc, "resourceLogs") for sl in json_list(rl, "scopeLogs")]
        records = [lr for sl in scopes for lr in json_list(sl, "logRecords")]
    except TypeError as exc:
        raise OtlpError(400, f"not an OTLP JSON ExportLogsServiceRequest: {exc}") from None
    return [_json_entry(lr) for lr in records]


def _json_entry(lr: object) -> LogItem:
    """One OTLP JSON log record as an entry, or a Refusal saying which part of it is no log record's."""
    if not isinstance(lr, dict):
        return Refusal(f"{NOT_JSON_LOG_RECORD}: not an object")
    attributes = lr.get("attributes") or []
    if not isinstance(attributes, list):
        return Refusal(f"{NOT_JSON_LOG_RECORD}: attributes is not a list")
    attrs: dict[str, Any] = {}
    for i, kv in enumerate(attributes):
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            return Refusal(f"{NOT_JSON_LOG_RECORD}: attributes[{i}] has no string key")
        value = kv.get("value") or {}
        if not isinstance(value, dict):
            return Refusal(f"{NOT_JSON_LOG_RECORD}: attributes[{i}].value is not an object")
        attrs[kv["key"]] = json_value(value)
    nanos = _json_nanos(lr.get("timeUnixNano"))
    if nanos is None:
        return Refusal(f"{NOT_JSON_LOG_RECORD}: timeUnixNano is not a whole number of nanoseconds")
    ids = [lr.get(k) for k in ("traceId", "spanId")]
    trace_id, span_id = (v if isinstance(v, str) else "" for v in ids)
    return EnvoyLogEntry(attrs, nanos, trace_id, span_id)


def _json_nanos(value: object) -> int | None:
    """A JSON uint64 (a number, or a string of digits as OTLP JSON writes it); 0 when absent."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < _UINT64 else None
    if isinstance(value, float):  # a sender that writes the number as a float: whole and in range
        return int(value) if value.is_integer() and 0 <= value < _UINT64 else None
    if isinstance(value, str) and value.isdigit() and value.isascii() and len(value) <= MAX_NANOS_DIGITS:
        return int(value)
    return None


def _decode(raw: bytes, as_json: bool) -> list[LogItem]:
    """The log records of a body in either encoding (protobuf's never fail to be records)."""
    return decode_logs_json(raw) if as_json else [*decode_logs_protobuf(raw)]


def handle_logs_export(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None,
    max_body_bytes: int,
    max_records: int | None = MAX_LOG_RECORDS,
    default_class: str = DEFAULT_CLASS,
    received_at: float | None = None,
) -> ExportResult[RequestTiming]:
    """Answer one OTLP/HTTP logs request: 200 with its records (refused ones counted), 400, 413, 415.
    `received_at` (wall clock) is when it arrived: an entry that started far from it is refused."""
    return handle_http(
        body,
        content_type,
        content_encoding,
        max_body_bytes,
        _decode,
        lambda entries: admit_logs(entries, max_records, default_class, received_at),
        logs_response,
    )
