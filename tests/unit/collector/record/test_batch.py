"""The records batch wire format: a round trip keeps every field; a bad batch names its record and field."""

from __future__ import annotations

import json

import pytest

from lanewatch.collector.record.batch import BatchError, encode_batch, encode_record, parse_batch
from lanewatch.collector.record.timing import ErrorKind, RequestTiming


def tap(i: int, **kw: object) -> RequestTiming:
    base: dict[str, object] = {
        "source": "tap", "target": "127.0.0.1:8001", "lane": "fast", "request_class": "interactive",
        "model": "m", "started_at": 1_700_000_000.5 + i, "request_id": f"r{i}", "trace_id": f"{i:032x}",
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
    assert parse_batch(encode_batch(encode_record(r) for r in records)) == records


def test_an_empty_batch_is_valid_and_derived_keys_are_ignored() -> None:
    assert parse_batch(b'{"records": [], "from_a_newer_gateway": 1}') == []
    line = tap(0).to_json()
    assert "tpot_s" in line  # derived, sent, ignored on the way in
    line["from_a_newer_gateway"] = 1
    assert parse_batch(body([line])) == [tap(0)]


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
def test_a_bad_record_names_its_index_and_field(mutate: object, index: int, field: str) -> None:
    records = [tap(0).to_json(), tap(1).to_json(), tap(2).to_json()]
    mutate(records[1])  # type: ignore[operator]
    with pytest.raises(BatchError) as err:
        parse_batch(body(records))
    assert (err.value.index, err.value.field) == (index, field)
    assert str(err.value).startswith(f"records[{index}].{field}: ")


def test_non_finite_numbers_are_refused() -> None:
    raw = encode_batch([encode_record(tap(0))]).replace(b'"e2e_s":0.3', b'"e2e_s":NaN')
    with pytest.raises(BatchError) as err:
        parse_batch(raw)
    assert (err.value.index, err.value.field) == (0, "e2e_s")
    with pytest.raises(ValueError, match="not JSON compliant"):
        encode_record(tap(0, ttft_s=float("inf")))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "batch: not JSON"),
        (b"[]", "batch: "),
        (b"{}", "batch.records: Field required"),
        (b'{"records": {}}', "batch.records: "),
    ],
)
def test_a_batch_that_is_not_one_says_why(raw: bytes, message: str) -> None:
    with pytest.raises(BatchError) as err:
        parse_batch(raw)
    assert str(err.value).startswith(message) and err.value.index is None


def test_a_batch_over_the_record_limit_is_refused() -> None:
    raw = encode_batch(encode_record(tap(i)) for i in range(3))
    assert len(parse_batch(raw, max_records=3)) == 3
    with pytest.raises(BatchError, match="3 records, more than the 2"):
        parse_batch(raw, max_records=2)
