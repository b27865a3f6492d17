"""The error kind a record is counted under in metrics and SLOs: its `ErrorKind`, with the
client's own mistakes told apart.

A record's `error` says how the request failed (`http_4xx` for any 4xx but 429). A 4xx that
says the request itself was wrong — 400 (bad parameter), 404 (no such model or path),
413 (too large), 422 (unprocessable) — is the client's mistake, not the server's failure,
so metrics count it under its own kind (`http_400`, ...) and the availability SLI leaves
those kinds out by default. Other 4xx (401, 403 from a bad upstream key, 408, ...) stay
`http_4xx`: they can be the operator's fault. The set stays closed: four values more.
"""

from __future__ import annotations

from typing import Final

from lanewatch.collector.record.timing import ErrorKind, RequestTiming

__all__ = ["CLIENT_ERROR_KINDS", "METRIC_ERROR_KINDS", "client_kind", "metric_error_kind"]

# Statuses that say the client's request was wrong, and the kind each is counted under.
_CLIENT_STATUSES: Final = {400: "http_400", 404: "http_404", 413: "http_413", 422: "http_422"}
CLIENT_ERROR_KINDS: Final = tuple(_CLIENT_STATUSES.values())
# Every value of the error_kind label, in a stable order.
METRIC_ERROR_KINDS: Final = (*(k.value for k in ErrorKind), *CLIENT_ERROR_KINDS)


def client_kind(status: int | None) -> str | None:
    """`http_400` for a 400 and so on; None for a status that is not a client mistake."""
    return _CLIENT_STATUSES.get(status) if status is not None else None


def metric_error_kind(record: RequestTiming) -> str | None:
    """The error_kind label of a failed record (None when it succeeded)."""
    if record.error is None:
        return None
    if record.error is ErrorKind.HTTP_4XX:
        return client_kind(record.status) or record.error.value
    return record.error.value
