"""`lanewatch probe` names each error kind, its statuses, and the server's own words for it."""

from __future__ import annotations

from lanewatch.collector.cli.probe import error_lines
from lanewatch.collector.record.timing import ErrorKind, RequestTiming


def record(error: ErrorKind | None, status: int | None = None, message: str | None = None) -> RequestTiming:
    return RequestTiming(
        source="probe", target="t", lane="default", request_class="short", model="m",
        status=status, error=error, error_message=message,
    )  # fmt: skip


def test_messages_follow_their_kind_most_frequent_first() -> None:
    too_long = "This model's maximum context length is 2048 tokens."
    records = [
        record(ErrorKind.HTTP_4XX, 400, too_long),
        record(ErrorKind.HTTP_4XX, 400, too_long),
        record(ErrorKind.HTTP_4XX, 404, "The model `x` does not exist."),
        record(ErrorKind.CONNECT_REFUSED),
        record(None, 200),
    ]
    assert error_lines(records) == [
        "error connect_refused: 1 of 5",
        "error http_4xx: 3 of 5 (HTTP 400, 404)",
        f"  2 × {too_long}",
        "  The model `x` does not exist.",
    ]
