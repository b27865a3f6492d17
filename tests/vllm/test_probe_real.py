"""`lanewatch probe --otlp-listen` on a real vLLM: joins, and the client and server clocks agree."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.servers import free_port, lanewatch_command

from .contract import decode_spans
from .engine import SpanRelay, VllmHandle
from .traffic import wait_for

pytestmark = pytest.mark.vllm

PROBES = 100
# Float rounding between vLLM's clocks and ours; far below any phase measured here (~ms).
EPS_S = 0.0005
DECODE_TOLERANCE_S = 0.005
DECODE_LIMIT_S = 0.100
# The prober stamps the end of its send when its event loop resumes after the write; on a loaded
# machine that is late by a few ms, so `network` can exceed the real time before vLLM's arrival
# stamp (seen: 2.3 and 7.0 ms at load average ~20 on 2 cores, on 2 probes in 100 each run).
CLIENT_JITTER_S = 0.015


def server_spans(relay: SpanRelay) -> dict[str, dict[str, Any]]:
    """Attributes of every span received so far, by trace id."""
    return {s["trace_id"]: s["attributes"] for s in decode_spans(relay.snapshot())}


@pytest.mark.timeout(600)
def test_probes_join_real_spans_and_the_phases_nest(
    vllm_server: VllmHandle, span_relay: SpanRelay, tmp_path: Path
) -> None:
    # A short class keeps 100 probes near a minute on a busy 2-core machine (tiny: ~0.1-1 s each).
    cfg = tmp_path / "probe.yaml"
    cfg.write_text(
        yaml.safe_dump({"probe": {"classes": [{"name": "brief", "prompt_words": 8, "max_tokens": 4}]}})
    )
    port = free_port()
    args = [*lanewatch_command(), "probe", vllm_server.url, "-m", vllm_server.model, "-n", str(PROBES)]
    args += ["-c", str(cfg), "--class", "brief", "--json", "--otlp-listen", f"127.0.0.1:{port}"]
    with span_relay.forwarding_to(f"http://127.0.0.1:{port}/v1/traces"):
        done = subprocess.run(args, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == PROBES and all(line["error"] is None for line in lines), done.stdout[-2000:]
    joined = [line for line in lines if line["queue_s"] is not None]
    assert len(joined) >= 0.99 * PROBES, f"{len(joined)}/{PROBES} joined"

    trace_ids = {line["trace_id"] for line in joined}
    assert wait_for(lambda: trace_ids <= set(server_spans(span_relay)))
    spans = server_spans(span_relay)
    nest_errors, decode_off = [], []
    for line in joined:
        attrs = spans[line["trace_id"]]
        server_ttft = attrs["gen_ai.latency.time_to_first_token"]
        server_e2e = attrs["gen_ai.latency.e2e"]
        network = sum(line[k] or 0.0 for k in ("dns_s", "connect_s", "tls_s", "send_s"))
        figures = {
            "queue+prefill": line["queue_s"] + line["prefill_s"],
            "server_ttft": server_ttft,
            "client_ttft": line["ttft_s"],
            "network": network,
            "trace_id": line["trace_id"],
        }
        if not line["queue_s"] + line["prefill_s"] <= server_ttft + EPS_S:
            nest_errors.append(("queue + prefill > server ttft", figures))
        if not server_ttft <= line["ttft_s"] - network + CLIENT_JITTER_S:
            nest_errors.append(("server ttft > client ttft - network", figures))
        decode_off.append(abs(line["decode_s"] - (server_e2e - server_ttft)))
    assert nest_errors == []
    # vLLM stamps decode (last - first token) in the engine process but TTFT and e2e in the API
    # process; on 2 cores at load average ~20 only 70 of 100 probes had the two within 5 ms, the
    # rest up to ~30 ms apart. So: the median within 5 ms, and every
    # probe within 100 ms, which still catches a unit slip or a missing phase.
    decode_off.sort()
    assert decode_off[len(decode_off) // 2] <= DECODE_TOLERANCE_S, decode_off[-10:]
    assert decode_off[-1] <= DECODE_LIMIT_S, decode_off[-10:]
