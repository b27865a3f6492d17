"""Decoding one record: every field comes back as written; a refusal names the field as a line spells it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from lanewatch.collector.record.codec import (
    RecordDecodeError,
    convert_record,
    decode_record,
    encode_record_json,
)
from lanewatch.collector.record.files import record_line
from lanewatch.collector.record.itl import bounded_gaps
from lanewatch.collector.record.timing import ErrorKind, RequestTiming
from tests.unit.collector.record.test_files import GOOD

BASE = replace(GOOD, status=200)


def _line(**changes: object) -> str:
    doc = json.loads(record_line(BASE))
    doc.update(changes)
    return json.dumps(doc, separators=(",", ":"))


def test_a_record_and_its_sampled_gaps_come_back_as_written() -> None:
    gaps, stats = bounded_gaps([0.01] * 2000 + [1.5])
    assert stats is not None
    record = RequestTiming.from_json({**BASE.to_json(), "itl_s": gaps, "itl_stats": stats.to_json()})
    assert decode_record(record_line(record)) == record
    assert decode_record(record_line(record).encode()) == record
    failed = RequestTiming(
        source="probe", target="t", lane="l", request_class="c", model="m", error=ErrorKind.HTTP_429
    )
    assert decode_record(record_line(failed)).error is ErrorKind.HTTP_429


@pytest.mark.parametrize(
    ("line", "field", "reason"),
    [
        (_line(ttft_s="slow"), "ttft_s", "expected float | null, got str"),
        (_line(itl_s=[0.01, "x"]), "itl_s.1", "expected float, got str"),
        (_line(itl_s=[0.01, -1]), "itl_s.1", "not a finite, non-negative number of seconds"),
        (_line(status=True), "status", "expected int | null, got bool"),
        (_line(attrs={"served_lane": "slow", "n": 5}), "attrs.n", "expected str, got int"),
        (_line(itl_stats={"count": 9, "sum_s": 1.0, "min_s": 0.0}), "itl_stats.max_s", "missing"),
        (_line(error="exploded"), "error", "invalid enum value 'exploded'"),
        ('{"source": "probe"}', "target", "missing"),
        ("[1, 2]", None, "expected a JSON object"),
        ('{"source": ', None, "not JSON (input data was truncated)"),
        (b'{"target": "\xff"}', None, "not UTF-8 text"),
        (_line().replace('"ttft_s":0.1', '"ttft_s":1e999'), "ttft_s", "not a finite, non-negative number"),
        (_line().replace('"e2e_s":0.5', '"e2e_s":NaN'), "e2e_s", "not a finite, non-negative number"),
        (_line().replace('"response_ttft_s":null', '"response_ttft_s":1e999'), "response_ttft_s", "not a"),
        (_line(cached_prompt_tokens=-3), "cached_prompt_tokens", "negative"),
        (_line(cached_prompt_tokens=1.5), "cached_prompt_tokens", "expected int | null, got float"),
    ],
)
def test_a_refusal_names_the_field_and_why(line: str | bytes, field: str | None, reason: str) -> None:
    with pytest.raises(RecordDecodeError) as exc:
        decode_record(line)
    assert exc.value.field == field and exc.value.reason.lower().startswith(reason.lower())


def test_a_lone_surrogate_is_repaired_on_either_way_in() -> None:
    line = _line().replace('"target":"gw"', '"target":"g\\ud800w"')
    assert decode_record(line).target == "g\ufffdw"
    assert convert_record(json.loads(line)).target == "g\ufffdw"


def test_a_parsed_value_is_checked_as_a_line_is() -> None:
    with pytest.raises(RecordDecodeError) as exc:
        convert_record({**json.loads(_line()), "response_queue_s": float("nan")})
    assert exc.value.field == "response_queue_s"
    with pytest.raises(RecordDecodeError, match="expected a JSON object"):
        convert_record([1])


def test_the_json_written_is_the_json_modules_in_value_and_reads_back_the_same() -> None:
    record = replace(BASE, send_s=0.0000123, itl_s=(1e-7, 0.1 + 0.2, 12.5), response_tokens_per_s=81.25)
    written = encode_record_json(record)
    assert json.loads(written) == json.loads(json.dumps(record.to_json()))
    assert decode_record(written) == record


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_number_json_cannot_hold_is_refused_not_written_as_null(value: float) -> None:
    with pytest.raises(ValueError, match="response_mean_itl_s"):
        encode_record_json(replace(BASE, response_mean_itl_s=value))


def test_cached_prompt_tokens_round_trip_through_the_line_and_the_old_lines_read_as_unreported() -> None:
    record = replace(BASE, prompt_tokens=1200, cached_prompt_tokens=1024)
    line = record_line(record)
    assert json.loads(line)["cached_prompt_tokens"] == 1024
    assert decode_record(line) == record
    assert RequestTiming.from_json(record.to_json()) == record
    assert json.loads(encode_record_json(record))["cached_prompt_tokens"] == 1024
    old = json.loads(record_line(BASE))
    del old["cached_prompt_tokens"]  # a line written before the field existed
    assert decode_record(json.dumps(old)).cached_prompt_tokens is None
