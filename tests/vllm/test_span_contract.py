"""vLLM's `llm_request` spans against the simulator's: attribute names, kinds, units and the parent."""

from __future__ import annotations

import httpx
import pytest

from lanewatch.simulator.tracing import SpanData, _attributes

from .contract import attribute_kinds, decode_spans
from .engine import VllmHandle
from .relay import SpanRelay
from .traffic import send, wait_for

pytestmark = pytest.mark.vllm

LATENCIES = (
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.latency.time_in_model_inference",
    "gen_ai.latency.time_to_first_token",
    "gen_ai.latency.e2e",
)
CLOCK_EPS_S = 0.001  # the span's start is arrival truncated to whole nanoseconds; float rounding


def simulator_attributes() -> dict[str, str]:
    """The simulator's span attributes and their kinds, for a request with every optional field."""
    data = SpanData("r", 0.0, 0.1, 0.5, 0.01, 0.05, 0.4, 7, 12, 12, 0.7, 0.9)
    return attribute_kinds(_attributes(data))


@pytest.mark.parametrize("stream", [True, False])
def test_real_span_has_the_simulators_attributes_units_and_the_incoming_parent(
    vllm_server: VllmHandle, span_relay: SpanRelay, stream: bool
) -> None:
    with httpx.Client(base_url=vllm_server.url, timeout=120) as client:
        sent = send(client, vllm_server.model, "chat", stream, max_tokens=12, temperature=0.7, top_p=0.9)

    def mine() -> list[dict[str, object]]:
        return [s for s in decode_spans(span_relay.snapshot()) if s["trace_id"] == sent.trace_id]

    assert wait_for(lambda: bool(mine())), "no llm_request span with the request's trace id"
    (span,) = mine()
    assert span["name"] == "llm_request"
    assert span["kind"] == 2  # SPAN_KIND_SERVER
    assert span["parent_span_id"] == sent.parent_span_id
    assert span["attribute_kinds"] == simulator_attributes()
    attrs = span["attributes"]
    assert isinstance(attrs, dict)
    # Seconds, not milliseconds: every phase lies inside the client's own wall time.
    for key in LATENCIES:
        assert 0 <= attrs[key] <= sent.wall_s, (key, attrs[key], sent.wall_s)
    assert attrs["gen_ai.latency.time_to_first_token"] <= attrs["gen_ai.latency.e2e"]
    # start = arrival, end = finish. vLLM stamps e2e when it starts processing the engine's last
    # output and ends the span after that (time.time() both), so the span is at least e2e long;
    # how much longer is however long the API process waited for a core meanwhile (unbounded on
    # a loaded machine), and the span ends before the last chunk is sent, inside the client's time.
    duration, e2e = span["duration_s"], attrs["gen_ai.latency.e2e"]
    assert isinstance(duration, float) and isinstance(e2e, float)
    assert e2e - CLOCK_EPS_S <= duration <= sent.wall_s, (duration, e2e, sent.wall_s)
    assert attrs["gen_ai.usage.completion_tokens"] == sent.usage["completion_tokens"]
    assert attrs["gen_ai.usage.prompt_tokens"] == sent.usage["prompt_tokens"]
    assert attrs["gen_ai.request.max_tokens"] == 12
