"""The records reader on large files: chunks, bad values found in C passes and named, sampled records."""

from __future__ import annotations

import dataclasses
import gc
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.collector.record import files
from lanewatch.collector.record.files import RecordFileError, parse_record_line, read_records, record_line
from lanewatch.collector.record.itl import bounded_gaps
from lanewatch.collector.record.timing import ErrorKind, RequestTiming

FULL = RequestTiming(
    source="tap", target="gw", lane="fast", request_class="short", model="m", api="completions",
    started_at=1.7e9, request_id="r1", trace_id="a" * 32, span_id="b" * 16, status=200, dns_s=0.001,
    connect_s=0.002, tls_s=0.003, send_s=0.0004, ttfb_s=0.09, ttft_s=0.1, e2e_s=0.5,
    itl_s=(0.01, 0.02, 0.0), prompt_tokens=12, output_tokens=4, tokens_from_usage=True,
    queue_s=0.01, prefill_s=0.05, decode_s=0.4, phases_source="span", response_queue_s=0.01,
    response_ttft_s=0.05, response_generation_s=0.4, response_mean_itl_s=0.02,
    response_tokens_per_s=80.0, late_lane="slow", rescue_sent_s=0.07, late_wait_s=2.1,
    attrs={"served_lane": "slow"}, prompt_text="hi", response_text="yo",
)  # fmt: skip
FAILED = RequestTiming(
    source="probe", target="t", lane="slow", request_class="story", model="m", status=429,
    error=ErrorKind.HTTP_429, error_message="shed",
)  # fmt: skip


def test_a_sampled_record_keeps_its_exact_totals() -> None:
    gaps, stats = bounded_gaps([0.01] * 3000 + [2.0])
    record = replace(FULL, itl_s=gaps, itl_stats=stats)
    got = parse_record_line(record_line(record), 1)
    assert got == record and got.itl_stats is not None and got.itl_stats.max_s == 2.0


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ('"response_tokens_per_s":80.0', '"response_tokens_per_s":NaN', "field 'response_tokens_per_s'"),
        ("[0.01,0.02,0.0]", "[0.01,-0.02,0.0]", "field 'itl_s.1': not a finite"),
        ("[0.01,0.02,0.0]", "[0.01,0.02,1e999]", "field 'itl_s.2': not a finite"),
        ('"e2e_s":0.5', '"e2e_s":-0.5', "field 'e2e_s': not a finite"),
        ('"source":"tap"', '"source":"gateway"', "field 'source'"),
        ('"error":null', '"error":"exploded"', "field 'error'"),
        ('"attrs":{"served_lane":"slow"}', '"attrs":{"served_lane":5}', "field 'attrs.served_lane'"),
    ],
)
def test_bad_values_are_refused_naming_line_and_field(old: str, new: str, reason: str) -> None:
    line = record_line(FULL).replace(old, new)
    with pytest.raises(RecordFileError, match=r"^line 9: ") as exc:
        parse_record_line(line, 9)
    assert reason in str(exc.value)


def test_lines_split_across_chunks_keep_their_numbers(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(record_line(FULL) + "\n" + record_line(FAILED) + "garbage")
    with path.open("rb") as f:
        lines = [line for line, _ in files._lines(f, chunk=7)]
    assert lines == [record_line(FULL)[:-1].encode(), b"", record_line(FAILED)[:-1].encode(), b"garbage"]
    with pytest.raises(RecordFileError, match=r"^line 4: not JSON"):
        read_records(path)
    assert read_records(path, skip_bad=True).records == (FULL, FAILED)
    assert gc.isenabled()  # paused while reading only


_FLOAT_FIELDS = [f.name for f in dataclasses.fields(RequestTiming) if f.type in ("float", "float | None")]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
@pytest.mark.parametrize("field", [*_FLOAT_FIELDS, "itl_s"])
def test_a_non_finite_number_is_refused_naming_its_field(field: str, value: str) -> None:
    line = record_line(FULL).replace(
        '"itl_s":[0.01', f'"itl_s":[{value}' if field == "itl_s" else '"itl_s":[0.01'
    )
    if field != "itl_s":
        line = line.replace(f'"{field}":{getattr(FULL, field)!r}', f'"{field}":{value}')
    assert value in line
    with pytest.raises(RecordFileError) as exc:
        parse_record_line(line, 1)
    named = "itl_s.0" if field == "itl_s" else field
    assert str(exc.value).startswith(f"line 1: field '{named}': not a finite")


def _long_line(gaps: int) -> str:
    """A record whose line carries `gaps` ITL gaps (a records file written before gaps were bounded)."""
    return record_line(FULL).replace('"itl_s":[0.01,0.02,0.0]', '"itl_s":[' + ",".join(["0.01"] * gaps) + "]")


def test_a_line_over_the_limit_is_refused_naming_it_and_skipped_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    line = _long_line(files.MAX_LINE_BYTES // 5 + 10)
    assert len(line) > files.MAX_LINE_BYTES
    path.write_text(record_line(FAILED) + line + record_line(FAILED))
    with pytest.raises(RecordFileError, match=r"^line 2: longer than 2,097,152 bytes \(MAX_LINE_BYTES\)"):
        read_records(path)
    read = read_records(path, skip_bad=True)
    assert read.records == (FAILED, FAILED)
    assert [e.line_no for e in read.bad_lines] == [2]


@pytest.mark.parametrize("chunk", [1, 3, 4, 5, 7, 100])
def test_over_long_lines_across_chunks_keep_the_others_and_their_offsets(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "records.jsonl"
    data = b"ab\nlonglong\n\nxyz\nlongertoo\nend1\nlast-long"
    path.write_bytes(data)
    with path.open("rb") as f:
        got = list(files._offset_lines(f, chunk=chunk, limit=4))
    assert got == [(0, b"ab"), (3, None), (12, b""), (13, b"xyz"), (17, None), (27, b"end1"), (32, None)]


def test_a_huge_line_is_passed_over_without_holding_it(tmp_path: Path) -> None:
    import tracemalloc

    path = tmp_path / "records.jsonl"
    path.write_text(record_line(FAILED) + _long_line(4_000_000) + record_line(FAILED))  # 20 MB
    tracemalloc.start()
    try:
        read = read_records(path, skip_bad=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read.records == (FAILED, FAILED) and [e.line_no for e in read.bad_lines] == [2]
    # 325 MB when the line was decoded; now two chunks of the file at most (8 MiB each)
    assert peak < 40e6, f"{peak / 1e6:.1f} MB"
