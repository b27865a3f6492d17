"""What every OTLP export shares, traces and logs alike: the body, its answer and admission.

`handle_http` is one OTLP/HTTP export as a pure function over the body and headers
(protobuf or OTLP JSON, optionally gzip, bounded before and after inflating); a signal
(otlp.py's spans, otlp_logs.py's access-log entries) brings its decoders, how one item is
taken or refused, and its answer message. `admit` is the admission both HTTP and gRPC use:
each item stands alone, at most `max_items` are taken, and the refused are counted (with the
first one's reason) for the answer's partial success. Error bodies are `google.rpc.Status`,
as the OTLP/HTTP specification asks.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.rpc import status_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from lanewatch.collector.common.errors import ProtocolViolation
from lanewatch.collector.record.join import REFUSED_INVALID  # the item itself: bad times, not an access log

__all__ = [
    "JSON",
    "PROTOBUF",
    "REFUSED_INVALID",
    "REFUSED_LIMIT",
    "Admission",
    "ExportResult",
    "OtlpError",
    "Refusal",
    "admit",
    "any_value",
    "decompress",
    "handle_http",
    "json_list",
    "json_value",
    "too_large",
    "unauthorized",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_GRPC_INVALID_ARGUMENT = 3
_GRPC_RESOURCE_EXHAUSTED = 8
_GRPC_UNIMPLEMENTED = 12
_GRPC_UNAUTHENTICATED = 16

# Why an item was refused: the closed set of `reason` values on the refused counters.
REFUSED_LIMIT = "limit"  # past the per-export bound

E = TypeVar("E")  # an item as decoded (a span, a log entry)
T = TypeVar("T")  # an item as taken (a span, a record)


class OtlpError(ProtocolViolation, ValueError):
    """A request the receiver refuses: `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why one item cannot be taken (the others still are)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Admission(Generic[T]):
    """The items of one export that go on, and how many were refused, by reason."""

    kept: list[T] = field(default_factory=list)
    invalid: int = 0  # the item itself is refused (bad times, not an access-log entry, ...)
    over_limit: int = 0  # past the per-export bound
    reason: str = ""  # why the first refused item was

    @property
    def rejected(self) -> int:
        """Items refused in all."""
        return self.invalid + self.over_limit

    def refused(self) -> dict[str, int]:
        """The refused counts by reason (only the non-zero ones)."""
        counts = {REFUSED_INVALID: self.invalid, REFUSED_LIMIT: self.over_limit}
        return {k: v for k, v in counts.items() if v}


def admit(
    items: Iterable[E],
    max_items: int | None,
    take: Callable[[E], T | Refusal],
    label: Callable[[int, E], str],
    what: str,
) -> Admission[T]:
    """Each item taken or refused alone; at most `max_items` taken (`what` names them in the reason)."""
    kept: list[T] = []
    invalid = over = 0
    why = ""
    for i, item in enumerate(items):
        if max_items is not None and len(kept) >= max_items:
            problem = f"more than {max_items} {what} in one request"
            over += 1
        else:
            got = take(item)
            if not isinstance(got, Refusal):
                kept.append(got)
                continue
            problem = got.reason
            invalid += 1
        why = why or f"{label(i, item)}: {problem}"
    return Admission(kept, invalid, over, why)


@dataclass(frozen=True, slots=True)
class ExportResult(Generic[T]):
    """What to answer one OTLP/HTTP export with, and the items it carried."""

    status: int
    media_type: str
    body: bytes
    admission: Admission[T] = field(default_factory=Admission)

    @property
    def kept(self) -> list[T]:
        """The items admitted."""
        return self.admission.kept

    @property
    def rejected(self) -> int:
        """Items left out."""
        return self.admission.rejected

    @property
    def reason(self) -> str:
        """Why the first of them was."""
        return self.admission.reason


def handle_http(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None,
    max_body_bytes: int,
    decode: Callable[[bytes, bool], list[E]],
    admit_items: Callable[[list[E]], Admission[T]],
    respond: Callable[[Admission[T]], Message],
) -> ExportResult[T]:
    """One OTLP/HTTP export: 200 with its admitted items (refused ones counted), 400, 413 or 415.

    `decode(raw, as_json)` raises OtlpError for a body that is not the signal's request.
    """
    media = (content_type or "").split(";")[0].strip().lower()
    as_json = media == JSON
    try:
        if media not in (PROTOBUF, JSON):
            raise OtlpError(415, f"Content-Type must be {PROTOBUF} or {JSON}, got {media or 'none'}")
        items = decode(decompress(body, content_encoding, max_body_bytes), as_json)
    except OtlpError as exc:
        return _error(exc, as_json)
    admission = admit_items(items)
    answer = respond(admission)
    if as_json:
        return ExportResult(200, JSON, json.dumps(MessageToDict(answer)).encode(), admission)
    return ExportResult(200, PROTOBUF, answer.SerializeToString(), admission)


def too_large(content_type: str | None, limit: int) -> ExportResult[Any]:
    """The 413 answer for a body known to exceed `limit` before it was read."""
    return _error(OtlpError(413, f"body larger than {limit} bytes"), _is_json(content_type))


def unauthorized(content_type: str | None) -> ExportResult[Any]:
    """The 401 answer for a request without the configured bearer token."""
    return _error(OtlpError(401, "missing or wrong bearer token"), _is_json(content_type))


def forbidden(content_type: str | None, message: str) -> ExportResult[Any]:
    """The 403 answer for a known sender that may not send this (a reporter's feeds)."""
    return _error(OtlpError(403, message), _is_json(content_type))


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """The body as sent (identity or gzip), never inflated past `limit`; OtlpError otherwise."""
    if len(body) > limit:
        raise OtlpError(413, f"body larger than {limit} bytes")
    enc = (encoding or "identity").strip().lower()
    if enc == "identity":
        return body
    if enc != "gzip":
        raise OtlpError(415, f"Content-Encoding {enc!r} not supported (gzip or none)")
    d = zlib.decompressobj(wbits=31)
    try:
        out = d.decompress(body, limit + 1)  # never inflate past the limit
    except zlib.error as exc:
        raise OtlpError(400, f"bad gzip body: {exc}") from None
    if len(out) > limit:
        raise OtlpError(413, f"body larger than {limit} bytes once decompressed")
    return out


def any_value(v: AnyValue) -> Any:
    """A protobuf attribute value as Python (strings, bools, ints, doubles; None for the rest)."""
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind in ("string_value", "bool_value", "int_value", "double_value") else None


def json_list(obj: Any, key: str) -> list[Any]:
    """`obj[key]` of an OTLP JSON object, a list (absent: empty); TypeError when it is not one."""
    if not isinstance(obj, dict):
        raise TypeError(f"expected an object holding {key!r}")
    value = obj.get(key) or []
    if not isinstance(value, list):
        raise TypeError(f"{key!r} must be a list")
    return value


def json_value(v: Mapping[str, Any]) -> Any:
    """An OTLP JSON attribute value (an int64 arrives as a string: the reader converts)."""
    for key in ("stringValue", "boolValue", "intValue", "doubleValue"):
        if key in v:
            return v[key]
    return None


def _is_json(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == JSON


def _error(exc: OtlpError, as_json: bool) -> ExportResult[Any]:
    code = {
        401: _GRPC_UNAUTHENTICATED,
        413: _GRPC_RESOURCE_EXHAUSTED,
        415: _GRPC_UNIMPLEMENTED,
    }.get(exc.status, _GRPC_INVALID_ARGUMENT)
    if as_json:
        body = json.dumps({"code": code, "message": str(exc)}).encode()
        return ExportResult(exc.status, JSON, body)
    return ExportResult(
        exc.status, PROTOBUF, status_pb2.Status(code=code, message=str(exc)).SerializeToString()
    )
