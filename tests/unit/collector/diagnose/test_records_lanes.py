"""A records file naming many lanes: at most MAX_LANES summarised apart, the rest counted as lane
`other`, so the diagnosis's memory is bounded however many lane names a file holds."""

from __future__ import annotations

import tracemalloc
from dataclasses import replace
from pathlib import Path

from lanewatch.collector.diagnose import records as records_mod
from lanewatch.collector.diagnose.gather import Sources, gather
from lanewatch.collector.diagnose.records import MAX_LANES, Folded, lanes_from_records
from lanewatch.collector.record.files import record_line
from tests.unit.collector.diagnose.build import SLO, Shape, records


def test_lanes_past_the_limit_are_counted_as_other_and_named_lanes_keep_theirs() -> None:
    base = records(Shape(stall_s=0.3, stall_every=3, long_prompt_every=4), n=60)
    rs = [replace(r, lane=f"l{i % 6}") for i, r in enumerate(base)]
    folded = Folded()
    lanes = records_mod.lanes_from_keyed(
        enumerate(rs), lambda keys: ((k, rs[k]) for k in keys), keep={"l5"}, max_lanes=3, folded=folded
    )
    assert sorted(lanes) == ["l0", "l1", "l2", "l5", "other"]
    assert lanes["other"].stats.requests == 20 and lanes["l5"].stats.requests == 10
    assert (folded.records, folded.first) == (20, "l3")
    # the records counted as `other` are summarised as one lane would be, stalls included
    alone = lanes_from_records([replace(r, lane="other") for r in rs if r.lane in ("l3", "l4")])
    assert lanes["other"].stats == alone["other"].stats
    assert alone["other"].stats.stall_share_of_e2e is not None


def test_a_file_of_many_lanes_is_diagnosed_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    lanes = 20 * MAX_LANES
    one = records(Shape(), n=1)[0]
    with path.open("w", encoding="utf-8") as f:
        f.writelines(
            record_line(replace(one, lane=f"lane-{i}", started_at=one.started_at + i)) for i in range(lanes)
        )
    tracemalloc.start()
    try:
        window, _ = gather(Sources(path, lanes=("lane-19999",)), {"slow": SLO})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(window.lanes) == MAX_LANES + 2  # the first MAX_LANES, the one asked for, and `other`
    assert window.lanes["other"].stats.requests == lanes - MAX_LANES - 1
    assert "18,999 records of lanes past the first 1,000 (from 'lane-1000' on) counted as lane 'other'" in (
        window.sources
    )
    # 13 KB a lane summarised apart (260 MB here) before the bound; about 50 MB with it, most of
    # it the reader's 8 MiB chunk split into lines
    assert peak < 130e6, f"{peak / 1e6:.0f} MB"
