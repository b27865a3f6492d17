"""Envoy's access-log entries to `RequestTiming` (source `envoy`): a pure mapping, no I/O.

Envoy's OpenTelemetry access logger (`envoy.access_loggers.open_telemetry`) sends one OTLP
log record per finished request; its `attributes` are what the operator's config puts there,
each a string from Envoy's format operators. lanewatch reads these keys (deploy/envoy/access-log.yaml
sets them all):

- `upstream_cluster` (`%UPSTREAM_CLUSTER%`): `lane` (UNROUTED without one);
- `upstream_host` (`%UPSTREAM_HOST%`): `target` (the lane without one);
- `response_code` (`%RESPONSE_CODE%`): `status` (0, no response sent: none);
- `response_flags` (`%RESPONSE_FLAGS%`): `error`, with the status (FLAG_ERRORS);
- `ttft_us` or `ttft_ms` (`%COMMON_DURATION(DS_RX_END:US_RX_BODY_BEG:us)%`): `ttft_s`, the
  request body's last byte to the upstream's first body byte, for a streamed answer only;
- `ttfb_us` or `ttfb_ms` (`%COMMON_DURATION(DS_RX_END:US_RX_BEG:us)%`): `ttfb_s`, its headers;
- `duration_us` or `duration_ms` (`%DURATION%`, from the request's first byte): `e2e_s`, less the upload;
- `upload_us` or `upload_ms` (`%COMMON_DURATION(DS_RX_BEG:DS_RX_END:us)%`): the client's upload,
  its first byte to its body's last (`-` while it still uploads): taken out of `e2e_s` and added to
  `started_at`, so every time of the record counts from the body's end (docs/slo.md, "The
  evidence contract"), as the gateway's do;
- `content_type` (`%RESP(CONTENT-TYPE)%`): `text/event-stream` is a streamed answer; any other
  (or none) has no observable first token, so `ttft_s` is None (a non-streamed answer's first body
  byte is its whole answer);
- `request_id` (`%REQ(X-REQUEST-ID)%`): `request_id`;
- `traceparent` (`%REQ(TRACEPARENT)%`, the one Envoy sent upstream): `trace_id`, and its
  parent-id as `span_id` (the span vLLM's `llm_request` span is under);
- `request_class` (`%REQ(<a header a trusted hop sets>)%`): `request_class`; the default when
  absent or not a class name;
- `model` (`%REQ(<header>)%`): `model`, else `route_name` (`%ROUTE_NAME%`), else UNKNOWN_MODEL;
- `path` (`%REQ(:PATH)%`): `api`: `chat` for /v1/chat/completions, `completions` for
  /v1/completions (INFERENCE_PATHS; a query string aside). Any other path (`GET /v1/models`,
  `GET /health`: a client's or a load balancer's polls) is not inference: the entry is refused
  (RecordError on `path`), so no poll's few-ms "TTFT" reaches a latency or availability SLI.
  An entry without `path` is taken as `chat` (the mapping cannot tell).

`%RESPONSE_DURATION%` and `US_RX_BEG` mark the upstream's response headers, which vLLM sends
before the first token: they are the record's ttfb, never its TTFT. Envoy writes `-` for a
value it does not have (and for a misspelled time point, which validation does not catch):
the field is then absent (None), never 0. A number that does not parse, or is negative, refuses
the record alone with `RecordError` naming the attribute; text is bounded by the record's rules.
A record no real request could be (a duration past its bound, a TTFT past the duration, a start
far from the entry's arrival: collector/record/plausible.py) is refused with `RecordError` naming
the record's field (`e2e_s`, `ttft_s`, `started_at`).

With the HCM's `access_log_options.access_log_flush_interval` set (deploy/envoy/access-log.yaml),
Envoy also logs each stream still under way every interval, `access_log_type`
(`%ACCESS_LOG_TYPE%`) `DownstreamPeriodic`; the entry at its end says `DownstreamEnd`. A periodic
entry is no record: `progress_from_log` makes it the fast guard's progress event (reporter
`envoy`, the id a hash of `x-request-id`), its age so far from the body's end (`%DURATION%` less
`upload_us`), or its TTFT once Envoy 1.40 has the first body byte (`ttft_us` is `-` before it).
Only a request that waits on a stream is judged: a periodic entry whose body is still uploading
(`upload_us` `-`), or whose answer's head is not `text/event-stream` (a non-streamed request's
head comes only with its whole answer), makes no event. `end_progress` makes the end entry's
record the same request's last event, so the guard's judge, which judges an id once, never
counts a request twice. An entry without `access_log_type` is an end entry, as before. An entry
without `upload_us` or `content_type` (an older access-log format) is taken as that format meant.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from lanewatch.collector.common.validation import CLASS_NAME_PATTERN, LANE_NAME_PATTERN
from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.progress.wire import MAX_AGE_S
from lanewatch.collector.record.builder import RecordBuilder
from lanewatch.collector.record.plausible import check_plausible
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import Api, ErrorKind, RequestTiming, error_kind_for_status

__all__ = [
    "ACCESS_LOG_TYPE",
    "DEFAULT_CLASS",
    "DURATION_KEYS",
    "FLAG_ERRORS",
    "INFERENCE_PATHS",
    "NOT_INFERENCE",
    "PERIODIC",
    "REPORTER",
    "STREAM_CONTENT_TYPE",
    "UNKNOWN_MODEL",
    "UNROUTED",
    "EnvoyLogEntry",
    "end_progress",
    "error_kind",
    "inference_api",
    "is_access_log",
    "is_periodic",
    "progress_from_log",
    "progress_id",
    "record_from_log",
    "trace_context",
]

MISSING: Final = "-"  # what Envoy logs for a value it does not have
UNROUTED: Final = "unrouted"  # the lane of a request Envoy sent to no cluster (no route, say)
UNKNOWN_MODEL: Final = "unknown"
DEFAULT_CLASS: Final = "interactive"
MAX_NUMBER_CHARS: Final = 32  # a longer "number" is refused before it is parsed
# The durations, each read from `<key>_us` (microseconds) or else `<key>_ms`.
DURATION_KEYS: Final = ("ttft", "ttfb", "duration")
# The routes whose entries become records, and the `api` each is: the two vLLM serves alike.
INFERENCE_PATHS: Final[dict[str, Api]] = {"/v1/chat/completions": "chat", "/v1/completions": "completions"}
NOT_INFERENCE: Final = "not an inference route (only /v1/chat/completions and /v1/completions are recorded)"
# Response flags that say how a request failed, most telling first; the status decides otherwise.
FLAG_ERRORS: Final[tuple[tuple[str, ErrorKind], ...]] = (
    ("DC", ErrorKind.CLIENT_DISCONNECT),  # downstream connection terminated (HTTP/1.1 give-up)
    ("DR", ErrorKind.CLIENT_DISCONNECT),  # downstream remote reset (an HTTP/2 client's RST_STREAM)
    ("DF", ErrorKind.DNS),  # DNS resolution of the upstream failed
    ("UF", ErrorKind.CONNECT),  # upstream connection failure
    ("UT", ErrorKind.TIMEOUT),  # upstream request timeout
    ("DT", ErrorKind.TIMEOUT),  # the stream's max duration passed
    ("UMSDR", ErrorKind.TIMEOUT),  # the upstream request's max stream duration passed
    ("SI", ErrorKind.STALL),  # stream idle timeout
    ("UPE", ErrorKind.BAD_STREAM),  # upstream protocol error
    ("UC", ErrorKind.TRUNCATED),  # upstream connection terminated (mid-stream after a 200)
    ("UR", ErrorKind.TRUNCATED),  # upstream remote reset
    ("LR", ErrorKind.TRUNCATED),  # local reset
    ("RL", ErrorKind.HTTP_429),  # rate limited locally
)
# The other flags Envoy 1.40 sets (LH, UH, UO, NR, NC, URX, DI, FI, UAEX, RLSE, IH, DPE, RFCF, NFCF,
# OM, DO) come with the status Envoy answered with (503, 404, 403, 400, ...), which says enough.
# `%ACCESS_LOG_TYPE%`: why Envoy wrote the entry; `DownstreamPeriodic` for a stream still under way
ACCESS_LOG_TYPE: Final = "access_log_type"
PERIODIC: Final = "DownstreamPeriodic"
REPORTER: Final = "envoy"  # the fast guard's reporter for every Envoy: ids are x-request-id hashes
# A streamed answer's media type: vLLM sends that head before prefill; a whole answer's comes with it
STREAM_CONTENT_TYPE: Final = "text/event-stream"
# Failures that say nothing of the lane, as the guard's judge takes a finished record (judge.py)
_NOT_THE_LANES: Final = frozenset({ErrorKind.HTTP_4XX, ErrorKind.CLIENT_DISCONNECT})
_FLAG_TOKENS: Final = re.compile(r"[A-Z]{1,8}")
_TRACEPARENT: Final = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_LANE: Final = re.compile(LANE_NAME_PATTERN)
_CLASS: Final = re.compile(CLASS_NAME_PATTERN)


@dataclass(frozen=True, slots=True)
class EnvoyLogEntry:
    """One OTLP log record as the receivers decoded it: string attributes and the record's own ids."""

    attributes: Mapping[str, Any]
    time_unix_nano: int = 0  # Envoy sets it to the request's start
    trace_id: str = ""  # 32 hex digits when Envoy's tracing was on, else ""
    span_id: str = ""  # 16 hex digits: Envoy's span for the request


def is_access_log(attributes: Mapping[str, Any]) -> bool:
    """True when a log record carries the duration an access-log entry has (`duration_us` or `_ms`)."""
    return "duration_us" in attributes or "duration_ms" in attributes


def record_from_log(
    entry: EnvoyLogEntry, default_class: str = DEFAULT_CLASS, received_at: float | None = None
) -> RequestTiming:
    """The record of one Envoy access-log entry; RecordError naming the attribute it cannot take
    (`path` for a route that is not inference: a poll's few-ms "TTFT" is no latency SLI's sample),
    or the record's field no real request could have (`received_at`: when the entry arrived)."""
    attrs = entry.attributes
    api = inference_api(_text(attrs, "path"))
    if api is None:
        raise RecordError("path", NOT_INFERENCE)
    cluster = _text(attrs, "upstream_cluster")
    lane = _lane(cluster)
    status = _status(attrs)
    flags = _text(attrs, "response_flags")
    trace_id, span_id = trace_context(_text(attrs, "traceparent"))
    if trace_id is None:
        trace_id, span_id = _own_ids(entry)
    extras = {k: v for k in ("upstream_host", "response_flags", "route_name") if (v := _text(attrs, k))}
    upload = _duration(attrs, "upload")
    duration = _duration(attrs, "duration")
    if upload is not None:  # every time from the body's end: the upload is the client's
        e2e = None if duration is None else max(duration - upload, 0.0)
    else:  # a body that never fully arrived never waited on the lane (or an older format: as it is)
        e2e = None if _logged(attrs, "upload") else duration
    started_at = entry.time_unix_nano / 1e9 + (upload or 0.0) if entry.time_unix_nano > 0 else 0.0
    record = RecordBuilder(
        source="envoy",
        target=_text(attrs, "upstream_host") or lane,
        lane=lane,
        request_class=_request_class(_text(attrs, "request_class"), default_class),
        model=_text(attrs, "model") or _text(attrs, "route_name") or UNKNOWN_MODEL,
        api=api,
        started_at=started_at,
        request_id=_text(attrs, "request_id"),
        trace_id=trace_id,
        span_id=span_id,
        status=status,
        error=error_kind(status, flags),
        ttfb_s=_duration(attrs, "ttfb"),
        ttft_s=_duration(attrs, "ttft") if _streamed(attrs) is not False else None,
        e2e_s=e2e,
        attrs=extras,
    ).build()
    check_plausible(record, received_at)
    return record


def is_periodic(attributes: Mapping[str, Any]) -> bool:
    """True for Envoy's periodic entry of a stream still under way (`DownstreamPeriodic`)."""
    return _text(attributes, ACCESS_LOG_TYPE) == PERIODIC


def progress_id(request_id: str) -> int:
    """The progress id of a request id: its first 15 hex digits of blake2b (below 2**60, stable)."""
    return int(hashlib.blake2b(request_id.encode(), digest_size=8).hexdigest()[:15], 16)


def progress_from_log(entry: EnvoyLogEntry) -> Progress | None:
    """The fast guard's event for a periodic entry: its TTFT once the first body byte came, else its
    age so far from the body's end; None while the body still uploads or the answer is no stream
    (nothing the lane's TTFT is waiting on). RecordError naming the attribute it cannot take (`path`
    for a route that is not inference, `request_id` when there is none to name the request by)."""
    attrs = entry.attributes
    if inference_api(_text(attrs, "path")) is None:
        raise RecordError("path", NOT_INFERENCE)
    request_id = _text(attrs, "request_id")
    if request_id is None:
        raise RecordError("request_id", "a periodic entry needs one: it names the request")
    lane = _lane(_text(attrs, "upstream_cluster"))
    upload = _duration(attrs, "upload")
    if upload is None and _logged(attrs, "upload"):
        return None  # still uploading: the client's time, not the lane's
    if _streamed(attrs) is False:
        return None  # no stream's head (yet): a whole answer's first token is not observable
    ttft = _duration(attrs, "ttft")
    duration = _duration(attrs, "duration")
    if duration is None and ttft is None:
        raise RecordError("duration_ms", "a periodic entry needs its duration so far")
    age = ttft if ttft is not None else max((duration or 0.0) - (upload or 0.0), 0.0)
    if age > MAX_AGE_S:
        raise RecordError("duration_ms" if ttft is None else "ttft_us", "past any request's duration")
    return Progress(progress_id(request_id), lane, age, ttft is not None)


def end_progress(record: RequestTiming) -> Progress | None:
    """The end entry's record as the request's last event for the guard (the judge skips a request
    its periodic entries judged); None when it has no request id or says nothing of the lane: no
    first body byte and no failure, or the client's own (a 4xx but 429, a disconnect)."""
    if record.request_id is None:
        return None
    rid = progress_id(record.request_id)
    if record.ttft_s is not None:
        return Progress(rid, record.lane, record.ttft_s, True)
    if record.error is None or record.error in _NOT_THE_LANES or record.e2e_s is None:
        return None
    if record.status is not None and 400 <= record.status < 500 and record.status != 429:
        return None
    return Progress(rid, record.lane, record.e2e_s, False)


def inference_api(path: str | None) -> Api | None:
    """The `api` of an inference route (`chat` when no path was logged); None for any other path."""
    if path is None:
        return "chat"
    return INFERENCE_PATHS.get(path.split("?", 1)[0].rstrip("/") or "/")


def error_kind(status: int | None, flags: str | None) -> ErrorKind | None:
    """How a request failed, from Envoy's response flags first, then its status; None for success."""
    present = set(_FLAG_TOKENS.findall(flags or ""))
    for flag, kind in FLAG_ERRORS:
        if flag in present:
            return kind
    return ErrorKind.OTHER if status is None else error_kind_for_status(status)


def trace_context(traceparent: str | None) -> tuple[str | None, str | None]:
    """(trace id, parent id) of a valid W3C traceparent, else (None, None)."""
    match = _TRACEPARENT.fullmatch((traceparent or "").strip().lower())
    if match is None or match[1] == "ff" or not match[2].strip("0") or not match[3].strip("0"):
        return None, None
    return match[2], match[3]


def _own_ids(entry: EnvoyLogEntry) -> tuple[str | None, str | None]:
    """The log record's own trace and span ids (Envoy's span for the request), when valid."""
    trace_id, span_id = entry.trace_id.lower(), entry.span_id.lower()
    if len(trace_id) != 32 or not trace_id.strip("0"):
        return None, None
    return trace_id, span_id if len(span_id) == 16 and span_id.strip("0") else None


def _streamed(attrs: Mapping[str, Any]) -> bool | None:
    """Whether the answer's head says an event stream; None when the format logs no `content_type`."""
    if "content_type" not in attrs:
        return None
    media = (_text(attrs, "content_type") or "").split(";", 1)[0].strip().lower()
    return media == STREAM_CONTENT_TYPE


def _logged(attrs: Mapping[str, Any], key: str) -> bool:
    """True when the format logs `<key>_us` or `<key>_ms` at all (`-` included)."""
    return f"{key}_us" in attrs or f"{key}_ms" in attrs


def _text(attrs: Mapping[str, Any], key: str) -> str | None:
    """The attribute as text; None when absent, empty or Envoy's `-`."""
    value = attrs.get(key)
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    return None if text in ("", MISSING) else text


def _number(attrs: Mapping[str, Any], key: str) -> float | None:
    text = _text(attrs, key)
    if text is None:
        return None
    try:
        if len(text) > MAX_NUMBER_CHARS:
            raise ValueError
        value = float(text)
    except ValueError:
        raise RecordError(key, f"not a number: {text[:40]!r}") from None
    if not (0.0 <= value < float("inf")):
        raise RecordError(key, "not a finite, non-negative number")
    return value


def _duration(attrs: Mapping[str, Any], key: str) -> float | None:
    """Seconds from `<key>_us`, else `<key>_ms`; None when neither has a value."""
    micros = _number(attrs, f"{key}_us")
    if micros is not None:
        return micros / 1e6
    millis = _number(attrs, f"{key}_ms")
    return None if millis is None else millis / 1e3


def _status(attrs: Mapping[str, Any]) -> int | None:
    code = _number(attrs, "response_code")
    if code is None or code == 0:  # 0: Envoy sent no response (the client went away first)
        return None
    if code != int(code) or not 100 <= code <= 599:
        raise RecordError("response_code", f"not an HTTP status: {code!r}")
    return int(code)


def _lane(cluster: str | None) -> str:
    if cluster is None:
        return UNROUTED
    if not _LANE.fullmatch(cluster):
        raise RecordError("upstream_cluster", f"not a lane name: {cluster[:40]!r}")
    return cluster


def _request_class(value: str | None, default: str) -> str:
    """The header's class when it is a class name; the default otherwise (a client's junk adds no label)."""
    cls = (value or "").lower()
    return cls if _CLASS.fullmatch(cls) else default
