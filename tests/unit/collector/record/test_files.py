from __future__ import annotations

from pathlib import Path

import pytest

from lanewatch.collector.record.files import (
    RecordFileError,
    parse_record_line,
    parse_record_lines,
    read_records,
    record_line,
)
from lanewatch.collector.record.timing import ErrorKind, RequestTiming

GOOD = RequestTiming(
    source="tap", target="gw", lane="fast", request_class="short", model="m", started_at=1.7e9,
    ttft_s=0.1, e2e_s=0.5, itl_s=(0.01, 0.02), output_tokens=3, attrs={"served_lane": "slow"},
)  # fmt: skip
FAILED = RequestTiming(
    source="probe", target="t", lane="slow", request_class="story", model="m", error=ErrorKind.STALL
)


def test_round_trip_keeps_every_field() -> None:
    lines = [record_line(GOOD), record_line(FAILED.with_server_phases(0.1, 0.2, 0.3))]
    read = parse_record_lines(lines)
    assert read.records == (GOOD, FAILED.with_server_phases(0.1, 0.2, 0.3))
    assert read.records[1].error is ErrorKind.STALL
    assert read.bad_lines == ()


def test_content_fields_round_trip_and_a_line_without_them_reads_as_none() -> None:
    with_text = RequestTiming(
        source="probe", target="t", lane="fast", request_class="short", model="m",
        prompt_text='Say "hi"\n\u00e9\U0001f600', response_text="hi \u2026[truncated]",
    )  # fmt: skip
    assert '"prompt_text"' not in record_line(GOOD)
    read = parse_record_lines([record_line(with_text), record_line(GOOD)])
    assert read.records == (with_text, GOOD)
    assert read.records[1].prompt_text is None and read.records[1].response_text is None


@pytest.mark.parametrize("field", ["prompt_text", "response_text"])
@pytest.mark.parametrize("value", ["5", '["a"]', "{}"])
def test_content_that_is_not_text_names_its_field(field: str, value: str) -> None:
    line = record_line(GOOD).replace('"attrs":', f'"{field}":{value},"attrs":')
    with pytest.raises(RecordFileError, match=rf"^line 3: field '{field}'"):
        parse_record_line(line, 3)


def test_blank_lines_are_ignored_and_numbering_counts_them() -> None:
    with pytest.raises(RecordFileError) as exc:
        parse_record_lines([record_line(GOOD), "\n", "   \n", "{nope\n"])
    assert exc.value.line_no == 4
    assert str(exc.value).startswith("line 4: not JSON")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[1, 2]", "expected a JSON object"),
        ('{"source": "probe"}', "field 'target': missing"),
        (record_line(GOOD).replace('"e2e_s":0.5', '"e2e_s":"slow"'), "field 'e2e_s'"),
        (record_line(GOOD).replace('"error":null', '"error":"exploded"'), "field 'error'"),
        (record_line(GOOD).replace('"e2e_s":0.5', '"e2e_s":NaN'), "field 'e2e_s': not a finite"),
        (record_line(GOOD).replace('"ttft_s":0.1', '"ttft_s":1e999'), "field 'ttft_s': not a finite"),
        (record_line(GOOD).replace("[0.01,0.02]", "[0.01,Infinity]"), "field 'itl_s.1': not a finite"),
    ],
)
def test_bad_line_names_line_and_field(line: str, expected: str) -> None:
    with pytest.raises(RecordFileError, match=r"^line 7: ") as exc:
        parse_record_line(line, 7)
    assert expected in str(exc.value)


def test_skip_bad_counts_and_keeps_the_rest() -> None:
    read = parse_record_lines([record_line(GOOD), "garbage\n", record_line(FAILED), "{}\n"], skip_bad=True)
    assert read.records == (GOOD, FAILED)
    assert [e.line_no for e in read.bad_lines] == [2, 4]


def test_read_records_names_a_line_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(record_line(GOOD).encode() + b'{"lane": "\xff"}\n')
    with pytest.raises(RecordFileError, match=r"^line 2: not UTF-8 text$"):
        read_records(path)
    assert read_records(path, skip_bad=True).records == (GOOD,)


def test_records_files_are_created_owner_only_and_appended_to(tmp_path: Path) -> None:
    import os
    import stat

    from lanewatch.collector.record.files import RecordsWriter, open_for_append

    old = os.umask(0o022)  # the usual umask would leave them world-readable
    try:
        record = GOOD
        writer = RecordsWriter(tmp_path / "collector" / "records.jsonl")
        writer.write(record)
        writer.close()
        with RecordsWriter(tmp_path / "gateway" / "records.jsonl") as second:
            second.write(record)
        with pytest.raises(ValueError, match="closed"):
            second.write(record)
        with open_for_append(tmp_path / "collector" / "records.jsonl") as again:
            again.write(record_line(record))
        for who in ("collector", "gateway"):
            path = tmp_path / who / "records.jsonl"
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, who
        assert len(read_records(tmp_path / "collector" / "records.jsonl").records) == 2
        shared = tmp_path / "shared.jsonl"
        shared.write_text("")
        shared.chmod(0o640)  # an operator's choice for an existing file is kept
        open_for_append(shared).close()
        assert stat.S_IMODE(shared.stat().st_mode) == 0o640
    finally:
        os.umask(old)
