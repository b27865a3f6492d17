"""`lanewatch probe` on a real vLLM: spans join over gRPC, and the client and server clocks agree.

The session's vLLM exports over OTLP/gRPC (its default); the relay hands each export to the
probe's gRPC receiver (`--otlp-grpc-listen`) as the same call. (The HTTP receiver decodes the
same bytes; test_collect_real joins real spans through the collector's.)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.servers import free_port, lanewatch_command

from .contract import decode_spans
from .engine import MAX_MODEL_LEN, PER_REQUEST_METRICS, VllmHandle
from .relay import SpanRelay
from .traffic import SPAN_WAIT_S, wait_for

pytestmark = pytest.mark.vllm

PROBES = 100
# Float rounding between vLLM's clocks and ours; far below any phase measured here (~ms).
EPS_S = 0.0005
DECODE_TOLERANCE_S = 0.005
DECODE_LIMIT_S = 0.100
# The prober stamps the end of its send when its event loop resumes after the write; on a loaded
# machine that stamp is late by however long the process waited for a core (seen: 2.3, 7.0 and
# 18.3 ms at load average ~20 on 2 cores), so the send is checked on the median only. DNS, connect
# and TLS end before the first byte is written: a late stamp there delays the send too.
# The response's per-request metrics and the span come from the same engine timestamps.
RESPONSE_METRICS_S = 0.002


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
    args = [*lanewatch_command(), "probe", vllm_server.url, "-m", vllm_server.model, "-n", str(PROBES)]
    address = f"127.0.0.1:{free_port()}"
    args += ["-c", str(cfg), "--class", "brief", "--json", "--otlp-grpc-listen", address]
    # A probe goes out once its span joins it, so a long wait costs nothing while spans come; vLLM
    # batches them every 5 s from a thread of a busy process, and the CLI's 6 s default let 2 of
    # 100 go unjoined beside a CPU-bound job.
    args += ["--join-wait", str(SPAN_WAIT_S)]
    with span_relay.forwarding_over_grpc_to(address):
        done = subprocess.run(args, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == PROBES and all(line["error"] is None for line in lines), done.stdout[-2000:]
    # Span-joined only: with per-request metrics an unjoined record takes its phases from the response.
    joined = [line for line in lines if line["phases_source"] == "span"]
    print(f"probes joined over gRPC: {len(joined)}/{PROBES}")
    assert len(joined) >= 0.99 * PROBES, f"{len(joined)}/{PROBES} joined"
    assert PER_REQUEST_METRICS in vllm_server.args
    for line in joined:  # the response's metrics and the span come from the same engine timestamps
        assert line["response_queue_s"] is not None and line["response_ttft_s"] is not None
        assert abs(line["queue_s"] - line["response_queue_s"]) <= RESPONSE_METRICS_S, line
        assert abs(line["prefill_s"] - line["response_ttft_s"]) <= RESPONSE_METRICS_S, line

    trace_ids = {line["trace_id"] for line in joined}
    assert wait_for(lambda: trace_ids <= set(server_spans(span_relay)))
    spans = server_spans(span_relay)
    nest_errors, decode_off = [], []
    for line in joined:
        attrs = spans[line["trace_id"]]
        server_ttft = attrs["gen_ai.latency.time_to_first_token"]
        server_e2e = attrs["gen_ai.latency.e2e"]
        before_send = sum(line[k] or 0.0 for k in ("dns_s", "connect_s", "tls_s"))
        network = before_send + (line["send_s"] or 0.0)
        figures = {
            "queue+prefill": line["queue_s"] + line["prefill_s"],
            "server_ttft": server_ttft,
            "client_ttft": line["ttft_s"],
            "network": network,
            "trace_id": line["trace_id"],
        }
        if not line["queue_s"] + line["prefill_s"] <= server_ttft + EPS_S:
            nest_errors.append(("queue + prefill > server ttft", figures))
        if not server_ttft <= line["ttft_s"] - before_send + EPS_S:
            nest_errors.append(("server ttft > client ttft - dns, connect and tls", figures))
        decode_off.append(abs(line["decode_s"] - (server_e2e - server_ttft)))
    assert nest_errors == []
    # The send phase is not held to end before the server's TTFT starts: its end is stamped when
    # the write returns, and a client descheduled there on a loaded machine stamps it after vLLM
    # began (beside a CPU-bound job the median overlap was 13 ms, one probe's 183 ms). What holds
    # on any machine is the nesting above, which leaves send out.
    # vLLM stamps decode (last - first token) in the engine process but TTFT and e2e in the API
    # process; on 2 cores at load average ~20 only 70 of 100 probes had the two within 5 ms, the
    # rest up to ~30 ms apart. So: the median within 5 ms, and every
    # probe within 100 ms, which still catches a unit slip or a missing phase.
    decode_off.sort()
    assert decode_off[len(decode_off) // 2] <= DECODE_TOLERANCE_S, decode_off[-10:]
    assert decode_off[-1] <= DECODE_LIMIT_S, decode_off[-10:]


def test_a_request_over_the_context_reports_vllms_reason(vllm_server: VllmHandle, tmp_path: Path) -> None:
    cfg = tmp_path / "probe.yaml"
    cfg.write_text(
        yaml.safe_dump({"probe": {"classes": [{"name": "huge", "prompt_words": 8, "max_tokens": 100_000}]}})
    )
    args = [*lanewatch_command(), "probe", vllm_server.url, "-m", vllm_server.model, "-c", str(cfg)]
    done = subprocess.run([*args, "--class", "huge", "--json"], capture_output=True, text=True, timeout=120)
    (line,) = [json.loads(x) for x in done.stdout.splitlines()]
    assert done.returncode == 1 and line["status"] == 400
    # vLLM 0.32: "max_tokens=100000 cannot be greater than max_model_len=2048. Please request fewer ..."
    print(f"error_message: {line['error_message']}")
    assert str(MAX_MODEL_LEN) in line["error_message"] and len(line["error_message"]) <= 200, line
