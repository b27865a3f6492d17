from __future__ import annotations

import pytest

from lanewatch.collector.gateway.tap.tracing import GatewayTracing, parse_traceparent

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (PARENT, (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, True)),
        (PARENT[:-2] + "00", (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, False)),
        (
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future",
            (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, True),
        ),
        (None, None),
        ("", None),
        ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", None),  # forbidden version
        ("00-00000000000000000000000000000000-b7ad6b7169203331-01", None),  # zero trace id
        ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", None),  # zero span id
        ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", None),  # upper case
        (PARENT + "-extra", None),  # version 00 has exactly four fields
    ],
)
def test_parse_traceparent(value: str | None, expected: tuple[int, int, bool] | None) -> None:
    assert parse_traceparent(value) == expected


def test_ids_follow_the_client_trace_or_start_one() -> None:
    tracing = GatewayTracing()
    child = tracing.ids_for({"traceparent": PARENT, "tracestate": "vendor=1"})
    assert (
        child.trace_id_hex == "0af7651916cd43dd8448eb211c80319c"
        and child.parent_span_id == 0xB7AD6B7169203331
    )
    carrier: dict[str, str] = {}
    tracing.inject(child, carrier)
    assert carrier["traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c-")
    assert carrier["traceparent"].endswith("-01") and carrier["tracestate"] == "vendor=1"
    fresh = [tracing.ids_for({}) for _ in range(3)]
    assert len({i.trace_id for i in fresh}) == 3 and all(
        i.sampled and i.parent_span_id is None for i in fresh
    )
    unsampled = tracing.ids_for({"traceparent": PARENT[:-2] + "00"})
    assert unsampled.traceparent.endswith("-00")  # the client's decision travels upstream
    tracing.shutdown()
