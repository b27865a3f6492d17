"""JSON nested deeper than Python's stack is bad input (a 400, a bad chunk), never a crash or a 500.

`json.loads` raises RecursionError, not ValueError, for such input: ~100 KB of `[` is enough.
"""

from __future__ import annotations

import pytest

from lanewatch.collector.collect.otlp import handle_export
from lanewatch.collector.collect.otlp_wire import JSON
from lanewatch.collector.http1.sse import ChunkKind, classify
from lanewatch.simulator import protocol

DEEP = "[" * 100_000


def test_otlp_json_receiver_answers_400() -> None:
    result = handle_export(DEEP.encode(), JSON, None, 1 << 20)
    assert result.status == 400 and b"not JSON" in result.body


def test_sse_event_is_a_bad_chunk() -> None:
    assert classify(DEEP).kind is ChunkKind.BAD


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_simulator_request_is_a_400(api: protocol.Api) -> None:
    with pytest.raises(protocol.ApiError) as err:
        protocol.parse_request(api, DEEP.encode(), "m", 4096, 0)
    assert err.value.status == 400
