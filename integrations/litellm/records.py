"""LiteLLM's standard logging payload -> one `RequestTiming` of source `litellm`; pure.

The payload (`kwargs["standard_logging_object"]` of a success or failure event) carries the
request's wall-clock `startTime` (LiteLLM began the call), `completionStartTime` (the first chunk
from the upstream, of any kind; without a stream, the end) and `endTime`, the
`model_group` the client asked for and the deployment (`model_id`) that served it, the usage
(its counts at the top, and the upstream's whole usage object as `metadata.usage_object`, which
the one usage reader, collector/openai_api/usage.py, reads as it reads the gateway's and the prober's:
`cached_prompt_tokens` comes from there) and, on failure, `error_information.error_code` (the
HTTP status as text). Its `trace_id` is the client's W3C `traceparent` trace id when the client
sent one (else a LiteLLM uuid, which is no trace id and is left out).

The first token is the first chunk that carries answer text, as the handler's streaming hook saw
it pass (`first_at`): LiteLLM's `completionStartTime` is its first chunk of any kind, a role alone
included, which an upstream may send before it has a token. Without that stamp (a stream the hook
did not see), `completionStartTime` stands in.

The TTFT clock starts when the request's body has fully arrived (docs/slo.md, the evidence
contract): the handler's pre-call hook stamps that moment (`body_at`, Unix seconds), after LiteLLM
has read and parsed the body and before it calls the upstream, and a record is timed from it.
LiteLLM's `arrival_time` is no start: it is stamped as the request enters auth, before the body
is read, so it holds a slow client's upload. Without the stamp, the record is timed from
`startTime` (taken after the proxy's own work: auth, the pre-call hooks, the router).

Only a streamed answer has an observable first token: a non-streamed record has `ttft_s` None
(its `completionStartTime` is the end), so it never counts toward a TTFT SLO.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from lanewatch.collector.openai_api.usage import Usage, parse_usage
from lanewatch.collector.record.builder import RecordBuilder
from lanewatch.collector.record.timing import Api, ErrorKind, RequestTiming, error_kind_for_status

__all__ = ["API_OF_CALL", "UNROUTED", "record_of"]

UNROUTED = "unrouted"  # the lane of a model group the lane map does not name
# LiteLLM's call types that are one generation each; the others (embeddings, images, ...) are no
# request lanewatch times.
API_OF_CALL: Mapping[str, Api] = {
    "acompletion": "chat",
    "completion": "chat",
    "atext_completion": "completions",
    "text_completion": "completions",
}
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_MAX_ERROR_CHARS = 200


def _seconds(value: Any) -> float | None:
    """A payload time as Unix seconds (LiteLLM writes floats; a datetime is read too)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    stamp = getattr(value, "timestamp", None)
    return float(stamp()) if callable(stamp) else None


def _span(start: float, at: float | None) -> float | None:
    """`at - start`, floored at 0 (two wall-clock reads can step back a hair); None when unknown."""
    return None if at is None else max(0.0, at - start)


def _status(payload: Mapping[str, Any]) -> int | None:
    info = payload.get("error_information") or {}
    code = str(info.get("error_code") or "")
    return int(code) if code.isdigit() and 100 <= int(code) <= 599 else None


def _error(payload: Mapping[str, Any], status: int | None) -> ErrorKind:
    kind = error_kind_for_status(status) if status is not None else None
    return kind or ErrorKind.OTHER


def lane_of(payload: Mapping[str, Any], lanes: Mapping[str, str]) -> str:
    """The lane of the model group (else of the deployment id) in `lanes`; `unrouted` otherwise."""
    for key in (payload.get("model_group"), payload.get("model_id")):
        if isinstance(key, str) and key in lanes:
            return lanes[key]
    return UNROUTED


def _either(first: int | None, second: int | None) -> int | None:
    return second if first is None else first


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def record_of(
    payload: Mapping[str, Any],
    lanes: Mapping[str, str],
    target: str,
    request_class: str,
    body_at: float | None = None,
    first_at: float | None = None,
) -> RequestTiming | None:
    """The record of one served request, timed from `body_at` (when its body had fully arrived) when
    known, else from LiteLLM's start of the call, to `first_at` (its first content chunk) when known,
    else LiteLLM's first chunk; None for a call type that is no generation."""
    api = API_OF_CALL.get(str(payload.get("call_type")))
    start = _seconds(payload.get("startTime"))
    if api is None or start is None:
        return None
    if body_at is not None and body_at <= start:  # a stamp after LiteLLM's start is no stamp
        start = body_at
    ok = payload.get("status") == "success"
    status = 200 if ok else _status(payload)
    e2e = _span(start, _seconds(payload.get("endTime")))
    # Only a stream has a first chunk apart from the end; a failure before one has none.
    first = first_at if first_at is not None else _seconds(payload.get("completionStartTime"))
    ttft = _span(start, first) if payload.get("stream") else None
    if ttft is not None and e2e is not None:
        ttft = min(ttft, e2e)
    usage = parse_usage(_usage_object(payload)) or Usage(None, None)
    # LiteLLM's own copies of the counts fill what the usage object left out; a failure produced
    # no answer whose tokens could be counted.
    usage = dataclasses.replace(
        usage,
        prompt_tokens=_either(usage.prompt_tokens, _int(payload.get("prompt_tokens"))),
        completion_tokens=_either(usage.completion_tokens, _int(payload.get("completion_tokens")))
        if ok
        else None,
    )
    trace = payload.get("trace_id")
    deployment = payload.get("model_id")
    message = None if ok else str(payload.get("error_str") or "")[:_MAX_ERROR_CHARS] or None
    return RecordBuilder(
        source="litellm",
        target=target,
        lane=lane_of(payload, lanes),
        request_class=request_class,
        model=str(payload.get("model_group") or payload.get("model") or ""),
        api=api,
        started_at=start,
        request_id=payload.get("litellm_call_id") or payload.get("id") or None,
        trace_id=trace if isinstance(trace, str) and _TRACE_ID.match(trace) else None,
        status=status,
        error=None if ok else _error(payload, status),
        error_message=message,
        ttft_s=ttft if ok or (ttft is not None and ttft < (e2e or 0.0)) else None,
        e2e_s=e2e,
        usage=usage,
        attrs={"deployment": deployment} if isinstance(deployment, str) and deployment else {},
    ).build()


def _usage_object(payload: Mapping[str, Any]) -> object:
    metadata = payload.get("metadata")
    return metadata.get("usage_object") if isinstance(metadata, Mapping) else None
