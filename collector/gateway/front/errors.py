"""OpenAI-shaped error bodies (as vLLM sends them) and how upstream failures map to them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from http import HTTPStatus

from lanewatch.collector.http1.client import ConnectFailed, UpstreamGone
from lanewatch.collector.http1.message import HttpError
from lanewatch.collector.record.timing import ErrorKind

from .connection import Response

__all__ = ["error_body", "error_kind_of", "error_response", "sse_error_event", "status_for"]

_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    405: "MethodNotAllowedError",
    409: "ConflictError",  # a stale revision, a shift to a lane of unknown models (openai.ConflictError)
    413: "RequestTooLargeError",
    429: "RateLimitError",
    431: "RequestHeaderFieldsTooLargeError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "GatewayTimeoutError",
    505: "HTTPVersionNotSupportedError",
}


def error_body(status: int, message: str, param: str | None = None) -> bytes:
    """`{"error": {message, type, param, code}}` as vLLM's ErrorResponse writes it."""
    fallback = "BadRequestError" if status < 500 else "InternalServerError"  # a client's error is not ours
    err = {"message": message, "type": _TYPES.get(status, fallback), "param": param}
    return json.dumps({"error": {**err, "code": status}}, separators=(",", ":")).encode()


def error_response(
    status: int, message: str, *, param: str | None = None, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON error response with the given status."""
    return Response(status, error_body(status, message, param), dict(headers or {}))


def sse_error_event(status: int, message: str) -> bytes:
    """An error frame and the closing [DONE], for a stream that broke after its headers went out."""
    return b"data: " + error_body(status, message) + b"\n\ndata: [DONE]\n\n"


def error_kind_of(exc: BaseException) -> ErrorKind:
    """The error kind of a failed upstream request."""
    if isinstance(exc, ConnectFailed):
        return _STAGES.get(exc.stage, ErrorKind.CONNECT)
    if isinstance(exc, TimeoutError):
        return ErrorKind.TIMEOUT
    if isinstance(exc, UpstreamGone):
        return ErrorKind.TRUNCATED
    if isinstance(exc, HttpError):
        return ErrorKind.BAD_STREAM
    return ErrorKind.OTHER


_STAGES = {
    "dns": ErrorKind.DNS,
    "connect_refused": ErrorKind.CONNECT_REFUSED,
    "connect_timeout": ErrorKind.CONNECT_TIMEOUT,
    "connect": ErrorKind.CONNECT,
    "tls": ErrorKind.TLS,
}


def status_for(kind: ErrorKind) -> int:
    """The status a client gets for an upstream failure of this kind before any byte was sent."""
    if kind in (ErrorKind.CONNECT_TIMEOUT, ErrorKind.TIMEOUT, ErrorKind.TTFT_TIMEOUT):
        return HTTPStatus.GATEWAY_TIMEOUT
    return HTTPStatus.BAD_GATEWAY
