"""The records batch wire format: a round trip keeps every field; a bad record is refused alone, by index
and field; a body that is no batch is refused whole."""

from __future__ import annotations

import json
import time

import pytest

from lanewatch.collector.record.batch import BatchError, ParsedBatch, encode_batch, encode_record, parse_batch
from lanewatch.collector.record.rules import MAX_ID_CHARS, MAX_LABEL_CHARS, RecordError
from lanewatch.collector.record.timing import ErrorKind, RequestTiming

# A start the ingest edges take: within a day of the test's clock (collector/record/plausible.py).
RECENT = round(time.time()) - 600.5


def tap(i: int, **kw: object) -> RequestTiming:
    base: dict[str, object] = {
        "source": "tap", "target": "127.0.0.1:8001", "lane": "fast", "request_class": "interactive",
        "model": "m", "started_at": RECENT + i, "request_id": f"r{i}", "trace_id": f"{i:032x}",
        "status": 200, "send_s": 0.0001, "ttfb_s": 0.01, "ttft_s": 0.02, "e2e_s": 0.3,
        "itl_s": (0.01, 0.0, 0.02), "prompt_tokens": 7, "output_tokens": 4, "tokens_from_usage": True,
        "attrs": {"routed_lane": "slow", "degraded": "shift"},
    }  # fmt: skip
    base.update(kw)
    return RequestTiming(**base)  # type: ignore[arg-type]


def body(records: list[dict[str, object]]) -> bytes:
    return json.dumps({"records": records}).encode()


def test_a_batch_round_trips_every_field() -> None:
    records = [
        tap(0),
        tap(1, status=503, error=ErrorKind.HTTP_5XX, ttft_s=None, e2e_s=0.01, itl_s=()),
        tap(2, queue_s=0.1, prefill_s=0.05, decode_s=0.2, prompt_text="hi", response_text="yo"),
    ]
    assert parse_batch(encode_batch(encode_record(r) for r in records)) == ParsedBatch(records)


def test_an_empty_batch_is_valid_and_derived_keys_are_ignored() -> None:
    assert parse_batch(b'{"records": [], "from_a_newer_gateway": 1}') == ParsedBatch([])
    line = tap(0).to_json()
    assert "tpot_s" in line  # derived, sent, ignored on the way in
    line["from_a_newer_gateway"] = 1
    assert parse_batch(body([line])).records == [tap(0)]


@pytest.mark.parametrize(
    ("mutate", "index", "field"),
    [
        (lambda r: r.update(ttft_s="fast"), 1, "ttft_s"),
        (lambda r: r.update(error="exploded"), 1, "error"),
        (lambda r: r.update(source="guess"), 1, "source"),
        (lambda r: r.pop("lane"), 1, "lane"),
        (lambda r: r.update(itl_s=[0.1, "x"]), 1, "itl_s.1"),
        (lambda r: r.update(attrs={"k": 1}), 1, "attrs.k"),
    ],
)
def test_a_bad_record_is_refused_alone_by_index_and_field(mutate: object, index: int, field: str) -> None:
    records = [tap(0).to_json(), tap(1).to_json(), tap(2).to_json()]
    mutate(records[1])  # type: ignore[operator]
    parsed = parse_batch(body(records))
    assert parsed.records == [tap(0), tap(2)]
    assert [(r.index, r.field) for r in parsed.refused] == [(index, field)]


@pytest.mark.parametrize(
    ("value", "field"),
    [(b"NaN", "e2e_s"), (b"Infinity", "e2e_s"), (b"-0.3", "e2e_s"), (b"1e999", "e2e_s")],
)
def test_non_finite_and_negative_durations_refuse_their_record_only(value: bytes, field: str) -> None:
    good = [encode_record(tap(i)) for i in range(3)]
    good[1] = good[1].replace(b'"e2e_s":0.3', b'"e2e_s":' + value)
    parsed = parse_batch(encode_batch(good))
    assert [r.request_id for r in parsed.records] == ["r0", "r2"]
    assert [(r.index, r.field) for r in parsed.refused] == [(1, field)]
    assert "finite, non-negative" in parsed.refused[0].reason


def test_negative_itl_gaps_and_token_counts_are_refused() -> None:
    a, b = tap(0).to_json(), tap(1).to_json()
    a["itl_s"] = [0.1, -0.01]
    b["output_tokens"] = -4
    parsed = parse_batch(body([a, b, tap(2).to_json()]))
    assert [(r.index, r.field) for r in parsed.refused] == [(0, "itl_s.1"), (1, "output_tokens")]
    assert len(parsed.records) == 1


def test_a_lone_surrogate_is_repaired_not_refused_and_labels_are_capped() -> None:
    # One client's "\ud800" model name once made the collector refuse every record of the batch.
    records = [tap(i).to_json() for i in range(21)]
    raw = body(records).replace(b'"model": "m"', b'"model": "\\ud800"', 1)
    assert raw.count(b"\\ud800") == 1
    parsed = parse_batch(raw)
    assert len(parsed.records) == 21 and not parsed.refused
    assert parsed.records[0].model == "\ufffd"
    encode_record(parsed.records[0]).decode()  # UTF-8 and JSON, as every reader needs
    big = tap(0).to_json() | {"model": "m" * 100_000, "target": "t" * 1000, "request_id": "r" * 10_000}
    parsed = parse_batch(body([big]))
    record = parsed.records[0]
    assert (len(record.model), len(record.target)) == (MAX_LABEL_CHARS, MAX_LABEL_CHARS)
    assert len(record.request_id or "") == MAX_ID_CHARS


def test_no_record_with_a_bad_number_can_be_built() -> None:
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(RecordError):
            tap(0, ttft_s=bad)
        with pytest.raises(RecordError):
            tap(0, queue_s=bad)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "batch: not JSON"),
        (b"[]", "batch: "),
        (b"{}", "batch: "),
        (b'{"records": {}}', "batch.records: "),
        (b"\xff\xfe", "batch: not JSON"),
        (b"[" * 100_000, "batch: not JSON"),
    ],
)
def test_a_batch_that_is_not_one_says_why(raw: bytes, message: str) -> None:
    with pytest.raises(BatchError) as err:
        parse_batch(raw)
    assert str(err.value).startswith(message)


def test_a_batch_over_the_record_limit_is_refused() -> None:
    raw = encode_batch(encode_record(tap(i)) for i in range(3))
    assert len(parse_batch(raw, max_records=3).records) == 3
    with pytest.raises(BatchError, match="3 records, more than the 2"):
        parse_batch(raw, max_records=2)
