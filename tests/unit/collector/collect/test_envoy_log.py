"""Envoy's access-log entries to records: every field, Envoy's `-`, and hostile values."""

from __future__ import annotations

from typing import Any

import pytest

from lanewatch.collector.collect.envoy_log import (
    UNKNOWN_MODEL,
    UNROUTED,
    EnvoyLogEntry,
    error_kind,
    is_access_log,
    record_from_log,
    trace_context,
)
from lanewatch.collector.record.rules import MAX_LABEL_CHARS, RecordError
from lanewatch.collector.record.timing import ErrorKind

TRACE = "7346cfaec8783bda4fef6ea7d7075708"
PARENT = "338e90bcb9d0f614"

# One entry as deploy/envoy/access-log.yaml makes Envoy 1.40 send it (values as Envoy logged them).
ENTRY: dict[str, Any] = {
    "upstream_cluster": "fast",
    "upstream_host": "127.0.0.1:8001",
    "response_code": "200",
    "response_flags": "-",
    "ttft_us": "41250",
    "ttfb_us": "37010",
    "duration_ms": "54",
    "request_id": "4c5b45c7-a35d-94f5-8df8-227a03f8aad1",
    "traceparent": f"00-{TRACE}-{PARENT}-01",
    "request_class": "batch",
    "model": "meta-llama/Llama-3.2-1B-Instruct",
    "route_name": "fast",
    "path": "/v1/chat/completions",
}


def entry(**changes: Any) -> EnvoyLogEntry:
    attrs = {**ENTRY, **changes}
    return EnvoyLogEntry({k: v for k, v in attrs.items() if v is not None}, 1_796_136_333_820_014_000)


def test_every_field_maps_where_it_belongs() -> None:
    r = record_from_log(entry())
    assert (r.source, r.lane, r.target) == ("envoy", "fast", "127.0.0.1:8001")
    assert (r.status, r.error, r.request_class) == (200, None, "batch")
    assert r.model == "meta-llama/Llama-3.2-1B-Instruct" and r.api == "chat"
    assert r.ttft_s == pytest.approx(0.04125) and r.ttfb_s == pytest.approx(0.03701)
    assert r.e2e_s == pytest.approx(0.054)
    assert r.started_at == pytest.approx(1_796_136_333.820014)
    assert (r.trace_id, r.span_id) == (TRACE, PARENT)
    assert r.request_id == "4c5b45c7-a35d-94f5-8df8-227a03f8aad1"
    assert r.attrs == {"upstream_host": "127.0.0.1:8001", "route_name": "fast"}
    assert r.output_tokens is None and r.queue_s is None  # only a joined span has these


def test_ttft_is_the_first_body_byte_never_the_response_headers() -> None:
    # Envoy's %RESPONSE_DURATION% marks the headers vLLM sends before the first token.
    r = record_from_log(entry(ttft_us=None, ttft_ms="601", ttfb_us=None, ttfb_ms="1", duration_ms="900"))
    assert r.ttft_s == pytest.approx(0.601) and r.ttfb_s == pytest.approx(0.001)
    assert record_from_log(entry(ttft_us="-", ttft_ms="601", duration_ms="900")).ttft_s == pytest.approx(
        0.601
    )


def test_microseconds_win_over_milliseconds() -> None:
    r = record_from_log(entry(duration_us="54321", duration_ms="54"))
    assert r.e2e_s == pytest.approx(0.054321)


@pytest.mark.parametrize("missing", ["-", "", None])
def test_a_dash_or_missing_operator_means_absent_never_zero(missing: str | None) -> None:
    r = record_from_log(
        entry(ttft_us=missing, ttfb_us=missing, duration_ms=missing, duration_us="1000", request_id=missing)
    )
    assert r.ttft_s is None and r.ttfb_s is None and r.request_id is None
    r = record_from_log(entry(upstream_host=missing, model=missing, request_class=missing))
    assert r.target == "fast" and r.model == "fast" and r.request_class == "interactive"
    r = record_from_log(entry(upstream_cluster=missing, route_name=missing, model=missing))
    assert r.lane == UNROUTED and r.model == UNKNOWN_MODEL


def test_the_default_class_is_configurable_and_a_bad_class_header_falls_back_to_it() -> None:
    assert record_from_log(entry(request_class="-"), default_class="bulk").request_class == "bulk"
    assert record_from_log(entry(request_class="Batch")).request_class == "batch"
    assert record_from_log(entry(request_class="x" * 500 + "$")).request_class == "interactive"


def test_completions_path_sets_the_api() -> None:
    assert record_from_log(entry(path="/v1/completions")).api == "completions"


@pytest.mark.parametrize(
    ("status", "flags", "kind"),
    [
        ("200", "-", None),
        ("429", "-", ErrorKind.HTTP_429),
        ("404", "NR", ErrorKind.HTTP_4XX),
        ("503", "-", ErrorKind.HTTP_5XX),
        ("503", "UF", ErrorKind.CONNECT),
        ("503", "UH", ErrorKind.HTTP_5XX),
        ("504", "UT", ErrorKind.TIMEOUT),
        ("200", "UC", ErrorKind.TRUNCATED),
        ("200", "DC", ErrorKind.CLIENT_DISCONNECT),
        ("0", "DC", ErrorKind.CLIENT_DISCONNECT),
        # an HTTP/2 client's RST_STREAM: the client's doing, never counted against availability
        ("200", "DR", ErrorKind.CLIENT_DISCONNECT),
        ("0", "DR", ErrorKind.CLIENT_DISCONNECT),
        ("504", "UMSDR", ErrorKind.TIMEOUT),
        ("200", "SI", ErrorKind.STALL),
        ("503", "UF,URX", ErrorKind.CONNECT),
        ("0", "-", ErrorKind.OTHER),
    ],
)
def test_error_kind_from_flags_then_status(status: str, flags: str, kind: ErrorKind | None) -> None:
    r = record_from_log(entry(response_code=status, response_flags=flags))
    assert r.error is kind
    assert r.status == (None if status == "0" else int(status))


def test_error_kind_reads_flags_alone() -> None:
    assert error_kind(200, None) is None and error_kind(None, "DF") is ErrorKind.DNS


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ttft_us", "abc"),
        ("ttft_us", "-5"),
        ("ttft_ms", "nan"),
        ("duration_ms", "inf"),
        ("duration_ms", "1" * 400),
        ("response_code", "99"),
        ("response_code", "200.5"),
        ("response_code", "7000"),
        ("upstream_cluster", "fast lane; rm -rf"),
        ("upstream_cluster", "x" * 33),
    ],
)
def test_a_hostile_value_refuses_the_record_naming_the_attribute(key: str, value: str) -> None:
    changes = {key: value, "ttft_us": None} if key == "ttft_ms" else {key: value}
    with pytest.raises(RecordError) as caught:
        record_from_log(entry(**changes))
    assert caught.value.field == key


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"duration_us": "1e297"}, "e2e_s"),  # finite, and it would poison the e2e histogram's _sum
        ({"duration_ms": "9e99", "ttft_us": None, "ttfb_us": None}, "e2e_s"),
        ({"ttft_us": None, "ttft_ms": "5000000", "duration_ms": "1"}, "ttft_s"),  # TTFT 5,000 s, e2e 1 ms
        ({"ttfb_us": "900000"}, "ttfb_s"),  # headers after the end (e2e is 54 ms)
    ],
)
def test_an_entry_no_real_request_could_make_is_refused_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(RecordError) as caught:
        record_from_log(entry(**changes))
    assert caught.value.field == field


def test_an_entry_is_refused_when_it_started_far_from_its_arrival() -> None:
    started = 1_796_136_333.820014  # entry()'s time
    assert record_from_log(entry(), received_at=started + 0.2).started_at == pytest.approx(started)
    for arrived in (started - 3600.0, started + 3 * 86_400.0):  # an hour early; three days late
        with pytest.raises(RecordError) as caught:
            record_from_log(entry(), received_at=arrived)
        assert caught.value.field == "started_at"
    year_2500 = EnvoyLogEntry(entry().attributes, 16_725_225_600 * 10**9)
    with pytest.raises(RecordError, match="after the record arrived"):
        record_from_log(year_2500, received_at=started)


def test_hostile_text_is_bounded() -> None:
    r = record_from_log(entry(model="m" * 10_000, request_id="r" * 10_000, upstream_host="h\ud800" * 5000))
    assert len(r.model) == MAX_LABEL_CHARS and len(r.request_id or "") <= 128
    assert len(r.target) == MAX_LABEL_CHARS and "\ud800" not in r.target


@pytest.mark.parametrize(
    "traceparent",
    [
        "garbage",
        f"ff-{TRACE}-{PARENT}-01",
        f"00-{'0' * 32}-{PARENT}-01",
        f"00-{TRACE}-{'0' * 16}-01",
        f"00-{TRACE[:-1]}-{PARENT}-01",
        f"00-{TRACE}-{PARENT}-01-extra",
    ],
)
def test_a_bad_traceparent_gives_no_trace(traceparent: str) -> None:
    assert trace_context(traceparent) == (None, None)
    r = record_from_log(entry(traceparent=traceparent))
    assert r.trace_id is None and r.span_id is None


def test_without_a_traceparent_the_log_records_own_ids_are_used() -> None:
    e = EnvoyLogEntry({**ENTRY, "traceparent": "-"}, 0, TRACE.upper(), PARENT)
    r = record_from_log(e)
    assert (r.trace_id, r.span_id, r.started_at) == (TRACE, PARENT, 0.0)
    assert record_from_log(EnvoyLogEntry({**ENTRY, "traceparent": "-"}, 0, "0" * 32, PARENT)).trace_id is None


def test_an_access_log_entry_has_a_duration() -> None:
    assert is_access_log({"duration_ms": "-"}) and is_access_log({"duration_us": "1"})
    assert not is_access_log({"message": "hello"})
