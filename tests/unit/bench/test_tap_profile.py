"""The tap profile's summary of py-spy's collapsed stacks."""

from __future__ import annotations

from bench.tap_profile import group_of, summarize

STACKS = [
    'process 1:"python";Runner.run (asyncio/runners.py:118);'
    "FrontConn._write (collector/gateway/front/connection.py:216) 6",
    "Runner.run (asyncio/runners.py:118);FrontConn._write (collector/gateway/front/connection.py:215) 2",
    "Runner.run (asyncio/runners.py:118);BodyParser._chunked (collector/http1/message.py:371) 1",
    "Runner.run (asyncio/runners.py:118) 1",
    "not a stack line",
]


def test_a_functions_lines_add_up_and_each_sample_counts_once() -> None:
    s = summarize(STACKS)
    assert s["samples"] == 10
    assert s["top_leaves"][0] == ("FrontConn._write (collector/gateway/front/connection.py)", 0.8)
    groups = dict(s["by_group"])
    assert groups["writing to the client (a transport.write a chunk)"] == 0.8
    assert groups["the upstream body's chunked framing"] == 0.1
    assert groups["the event loop (uvloop, in C)"] == 0.1
    assert abs(sum(groups.values()) - 1.0) < 1e-9


def test_groups_by_the_leaf_frame() -> None:
    assert group_of("StreamTap._scan (collector/gateway/tap/stream_scan.py)").startswith("the tap's scan")
    assert group_of("JSONEncoder.iterencode (json/encoder.py)").startswith("the record")
    assert group_of("something (elsewhere.py)") == "other"
    assert summarize([]) == {"samples": 0}
