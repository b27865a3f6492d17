"""Tailing records files another process appends to; per-lane phase statistics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lanewatch.collector.demo.records import PHASES, Recorder, RecordTail, lane_stats
from lanewatch.collector.record.files import read_records, record_line
from lanewatch.collector.record.timing import ErrorKind, RequestTiming


def rec(lane: str, ttft: float, source: str = "probe", **kw: object) -> RequestTiming:
    base: dict[str, object] = {
        "source": source,
        "target": f"vllm-{lane}",
        "lane": lane,
        "request_class": "short",
        "model": "m",
        "ttft_s": ttft,
        "e2e_s": ttft + 1.0,
        "output_tokens": 11,
        "itl_s": (0.1, 0.1),
    }
    base.update(kw)
    return RequestTiming(**base)  # type: ignore[arg-type]


def test_tail_returns_complete_lines_once_and_waits_for_a_partial_one(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    tail = RecordTail(path)
    assert tail.poll() == []  # not there yet
    first, second = record_line(rec("fast", 0.1)), record_line(rec("slow", 2.0))
    path.write_text(first + second[:20])
    assert [r.lane for r in tail.poll()] == ["fast"]
    assert tail.poll() == []
    with path.open("a") as f:
        f.write(second[20:] + "not a record\n\n")
    assert [r.lane for r in tail.poll()] == ["slow"]
    assert tail.bad_lines == 1


def test_recorder_copies_every_record_from_every_source_to_out(tmp_path: Path) -> None:
    a, b, out = tmp_path / "collector.jsonl", tmp_path / "gateway.jsonl", tmp_path / "out" / "records.jsonl"
    out.parent.mkdir()
    out.write_text("an earlier run's line\n")
    recorder = Recorder([a, b], out)
    a.write_text(record_line(rec("fast", 0.1)))
    b.write_text(record_line(rec("slow", 2.0, source="tap")) + "{oops\n")
    assert recorder.poll() == 2
    with a.open("a") as f:
        f.write(record_line(rec("fast", 0.2)))
    assert recorder.poll() == 1
    recorder.close()
    written = read_records(out).records
    assert [(r.lane, r.source) for r in written] == [("fast", "probe"), ("slow", "tap"), ("fast", "probe")]
    assert [r.ttft_s for r in recorder.kept] == [0.1, 2.0, 0.2]
    assert len(recorder.recent()) == 3 and recorder.bad_lines == 1
    assert all(json.loads(line)["source"] for line in out.read_text().splitlines())  # this run's only
    assert out.stat().st_mode & 0o777 == 0o600  # records may carry prompts: owner-only, as everywhere


def test_lane_stats_cover_every_phase_measured_and_skip_failures() -> None:
    records = [
        rec("slow", 1.0, queue_s=0.5, prefill_s=0.2, decode_s=0.8, dns_s=0.0, connect_s=0.001, tls_s=0.002),
        rec("slow", 3.0, queue_s=2.5, prefill_s=0.2, decode_s=0.8),
        rec("slow", 99.0, error=ErrorKind.HTTP_5XX),
        rec("fast", 0.01),
    ]
    stats = lane_stats(records)
    assert list(stats) == ["fast", "slow"]
    slow = stats["slow"]
    assert slow["ttft"].count == 2 and slow["ttft"].max == 3.0  # the failed one is out
    assert slow["queue"].p50 == pytest.approx(1.5)
    assert slow["itl"].count == 4 and slow["tpot"].p50 == pytest.approx(0.1)
    assert set(slow) <= set(PHASES) and {"dns", "connect", "tls", "e2e"} <= set(slow)
    assert "queue" not in stats["fast"]  # no server span joined
