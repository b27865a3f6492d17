"""`lanewatch probe --otlp-listen` on a real vLLM: joins, and the client and server clocks agree."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.servers import free_port, lanewatch_command

from .contract import decode_spans
from .engine import SpanRelay, VllmHandle
from .traffic import wait_for

pytestmark = pytest.mark.vllm

PROBES = 100
# Float rounding between vLLM's clocks and ours; far below any phase measured here (~ms).
EPS_S = 0.0005


def server_spans(relay: SpanRelay) -> dict[str, dict[str, Any]]:
    """Attributes of every span received so far, by trace id."""
    return {s["trace_id"]: s["attributes"] for s in decode_spans(relay.snapshot())}


def test_probes_join_real_spans_and_the_phases_nest(vllm_server: VllmHandle, span_relay: SpanRelay) -> None:
    port = free_port()
    args = [*lanewatch_command(), "probe", vllm_server.url, "-m", vllm_server.model, "-n", str(PROBES)]
    args += ["--class", "short", "--json", "--otlp-listen", f"127.0.0.1:{port}"]
    with span_relay.forwarding_to(f"http://127.0.0.1:{port}/v1/traces"):
        done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == PROBES and all(line["error"] is None for line in lines), done.stdout[-2000:]
    joined = [line for line in lines if line["queue_s"] is not None]
    assert len(joined) >= 0.99 * PROBES, f"{len(joined)}/{PROBES} joined"

    trace_ids = {line["trace_id"] for line in joined}
    assert wait_for(lambda: trace_ids <= set(server_spans(span_relay)))
    spans = server_spans(span_relay)
    for line in joined:
        attrs = spans[line["trace_id"]]
        server_ttft = attrs["gen_ai.latency.time_to_first_token"]
        server_e2e = attrs["gen_ai.latency.e2e"]
        network = sum(line[k] or 0.0 for k in ("dns_s", "connect_s", "tls_s", "send_s"))
        assert line["queue_s"] + line["prefill_s"] <= server_ttft + EPS_S, (line, attrs)
        assert server_ttft <= line["ttft_s"] - network + EPS_S, (line, attrs)
        assert abs(line["decode_s"] - (server_e2e - server_ttft)) <= 0.005, (line, attrs)
