"""A records file diagnosed as a stream: the same stats as the records held in a list, with only the
stalling records read a second time, and a line that changed between the reads not counted."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.collector.diagnose import lane_stats
from lanewatch.collector.diagnose.evidence import SloTargets
from lanewatch.collector.diagnose.gather import DiagnoseInputError, Sources, gather
from lanewatch.collector.diagnose.records import lanes_from_keyed, lanes_from_records
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS
from lanewatch.collector.record.files import keyed_records, record_line, records_at
from lanewatch.collector.record.timing import RequestTiming
from tests.unit.collector.diagnose.build import SLO, Shape, records

SLOS = {"slow": SLO, "fast": SloTargets(ttft_s=0.5, tpot_s=0.05)}


def _two_lanes() -> list[RequestTiming]:
    slow = records(Shape(queue=0.4, stall_s=0.3, stall_every=3, long_prompt_every=4, error_every=9), n=90)
    fast = records(Shape(connect=0.01, gap_s=7.0), n=40, lane="fast")
    return [r for pair in zip(slow, fast, strict=False) for r in pair] + slow[len(fast) :]


def _write(path: Path, rs: list[RequestTiming], extra: str = "") -> Path:
    path.write_text("".join(record_line(r) for r in rs) + extra, encoding="utf-8")
    return path


def test_a_file_read_as_a_stream_gives_the_stats_of_its_records_in_a_list(tmp_path: Path) -> None:
    rs = _two_lanes()
    path = _write(tmp_path / "records.jsonl", rs)
    asked: list[list[int]] = []

    def again(keys: Sequence[int]) -> Iterator[tuple[int, RequestTiming]]:
        asked.append(list(keys))
        return records_at(path, keys)

    streamed = lanes_from_keyed(keyed_records(path), again, SLOS)
    assert streamed == lanes_from_records(rs, SLOS)
    stats = streamed["slow"].stats
    assert stats.stall_share_of_e2e is not None and stats.stall_share_of_e2e.value > 0
    # one second look, at the stalling records only: every third slow record stalls
    assert len(asked) == 1 and 0 < len(asked[0]) < len(rs) // 3
    offsets = {key for key, _ in keyed_records(path)}
    assert set(asked[0]) <= offsets


def test_the_gap_sample_stays_bounded_and_spread(monkeypatch: pytest.MonkeyPatch) -> None:
    rs = records(Shape(stall_s=0.3, stall_every=2), n=600)
    total = sum(len(r.itl_s) for r in rs)
    monkeypatch.setattr(lane_stats, "MAX_POOLED_GAPS", total // 20)
    lane = lane_stats.LaneFold(SLO.tpot_s, DEFAULT_THRESHOLDS)
    for key, r in enumerate(rs):
        lane.add(key, r)
        assert len(lane._pool) <= total // 20
    assert total // 80 < len(lane._pool)
    stalled = sum(g == 0.3 for g in lane._pool) / len(lane._pool)
    assert stalled == pytest.approx(sum(g == 0.3 for r in rs for g in r.itl_s) / total, rel=0.35)


def test_a_stalling_line_that_changed_before_its_second_read_is_not_counted(tmp_path: Path) -> None:
    rs = records(Shape(stall_s=0.3, stall_every=3), n=60)
    path = _write(tmp_path / "records.jsonl", rs)
    keyed = list(keyed_records(path))
    # the file is rewritten between the reads: each line as long as before, each record started later
    moved = [replace(r, started_at=r.started_at + 1.0) for r in rs]
    _write(path, moved)
    assert [len(record_line(a)) for a in rs] == [len(record_line(b)) for b in moved]
    got = lanes_from_keyed(keyed, lambda keys: records_at(path, keys), {"slow": SLO})["slow"].stats
    assert got.stall_share_of_e2e is not None and got.stall_share_of_e2e.value == 0.0
    assert lanes_from_records(rs, {"slow": SLO})["slow"].stats.stall_share_of_e2e.value > 0  # type: ignore[union-attr]


def test_gather_streams_a_file_and_skips_bad_lines_only_when_asked(tmp_path: Path) -> None:
    rs = _two_lanes()
    path = _write(tmp_path / "records.jsonl", rs, extra="not a record\n")
    with pytest.raises(DiagnoseInputError, match=rf"line {len(rs) + 1}: not JSON .*--skip-bad"):
        gather(Sources(records=path), SLOS)
    window, queries = gather(Sources(records=path, skip_bad=True), SLOS)
    assert queries == () and dict(window.lanes) == lanes_from_records(rs, SLOS)


def test_a_stream_is_folded_in_memory_that_does_not_grow_with_its_gaps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tracemalloc

    monkeypatch.setattr(lane_stats, "MAX_POOLED_GAPS", 10_000)
    one = records(Shape(), n=3)[2]  # 255 gaps
    n = 4_000  # a million gaps: 32 MB as Python floats in tuples, were the records kept

    def stream() -> Iterator[tuple[int, RequestTiming]]:
        for i in range(n):  # each record built as it is read, as a file's are
            yield i, replace(one, started_at=one.started_at + i, itl_s=tuple(g + i * 1e-9 for g in one.itl_s))

    tracemalloc.start()
    try:
        lanes = lanes_from_keyed(stream(), lambda keys: iter(()), {"slow": SLO})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lanes["slow"].stats.requests == n
    assert peak < 6_000_000, peak
