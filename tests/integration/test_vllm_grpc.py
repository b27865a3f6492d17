"""Real vLLM in its default span mode: OTLP/gRPC, no protocol variable set, into lanewatch's gRPC receivers.

vLLM reads OTEL_EXPORTER_OTLP_TRACES_PROTOCOL and exports over gRPC (no TLS) when it is
unset; these tests start `vllm serve` (the CPU build and tiny model that `make vllm` caches)
with the variable removed from its environment and `--otlp-traces-endpoint` pointing at a
lanewatch gRPC receiver, then check that probes and tap records join its spans. Without the
cached install they skip loudly; under CI=true they fail instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry

from lanewatch.collector.collect.service import CollectorService, serve
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.record.timing import RequestTiming
from tests.servers import free_port, lanewatch_command, stop_process, wait_http

from .gateway_harness import start_gateway

pytestmark = pytest.mark.vllm

VERSION = os.environ.get("LANEWATCH_VLLM_VERSION") or "0.32.0"
MAX_MODEL_LEN = 2048
START_TIMEOUT_S = 600.0  # 70-120 s on 2 idle cores; far more on a shared machine
CPU_ENV = {  # what the CPU build needs: a small KV cache, no thread pinning, nothing from the network
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_TARGET_DEVICE": "cpu",
}
PROBES = 100
TAP_REQUESTS = 100


@dataclass(frozen=True)
class GrpcVllm:
    """A running `vllm serve` exporting spans over gRPC to `grpc_port` on 127.0.0.1."""

    url: str
    model: str
    grpc_port: int
    log_path: Path


def _install_root() -> Path:
    root = Path(os.environ.get("LANEWATCH_CACHE") or Path.home() / ".cache" / "lanewatch") / f"vllm-{VERSION}"
    missing = [
        p
        for p in (root / ".stamp", root / "venv/bin/vllm", root / "models/tiny/config.json")
        if not p.exists()
    ]
    if missing:
        reason = f"no cached vLLM {VERSION}: {missing[0]} missing (run `make vllm`)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and {reason}")
        pytest.skip(f"SKIPPED LOUDLY: {reason}")
    return root


@pytest.fixture(scope="module")
def grpc_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcVllm]:
    """`vllm serve` of the tiny model with vLLM's default span export (gRPC) and per-request metrics."""
    root = _install_root()
    port, grpc_port = free_port(), free_port()
    args = [
        str(root / "venv/bin/vllm"), "serve", str(root / "models/tiny"), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
        "--max-model-len", str(MAX_MODEL_LEN), "--enable-per-request-metrics",
        "--otlp-traces-endpoint", f"http://127.0.0.1:{grpc_port}",
    ]  # fmt: skip
    env = {**os.environ, **CPU_ENV}
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        env.pop(name, None)  # vLLM's default, gRPC, is what is under test
    log_path = tmp_path_factory.mktemp("vllm") / "vllm.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(
            f"{url}/health", proc, lambda: log_path.read_text(errors="replace"), timeout_s=START_TIMEOUT_S
        )
        yield GrpcVllm(url, "tiny", grpc_port, log_path)
    finally:
        stop_process(proc)


def _tail(v: GrpcVllm) -> str:
    return "\n".join(v.log_path.read_text(errors="replace").splitlines()[-30:])


@pytest.mark.timeout(900)
def test_every_probe_joins_its_span_sent_over_grpc(grpc_vllm: GrpcVllm, tmp_path: Path) -> None:
    cfg = tmp_path / "probe.yaml"
    cfg.write_text(yaml.safe_dump({"probe": {"classes": [
        {"name": "brief", "prompt_words": 8, "max_tokens": 4},
        {"name": "huge", "prompt_words": 8, "max_tokens": 100_000},
    ]}}))  # fmt: skip
    base = [*lanewatch_command(), "probe", grpc_vllm.url, "-m", grpc_vllm.model, "-c", str(cfg)]
    listen = ["--otlp-grpc-listen", f"127.0.0.1:{grpc_vllm.grpc_port}"]
    done = subprocess.run(
        [*base, "-n", str(PROBES), "--class", "brief", "--json", *listen],
        capture_output=True, text=True, timeout=800,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + _tail(grpc_vllm)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == PROBES and all(line["error"] is None for line in lines)
    joined = [line for line in lines if line["phases_source"] == "span"]
    assert len(joined) >= 0.99 * PROBES, f"{len(joined)}/{PROBES} joined\n{_tail(grpc_vllm)}"
    gaps = [abs(line["prefill_s"] - line["response_ttft_s"]) for line in joined]
    print(f"probes joined over gRPC: {len(joined)}/{PROBES}; max |prefill - response ttft| {max(gaps):.6f} s")
    for line in joined:  # the response's metrics and the span come from the same engine timestamps
        assert line["response_queue_s"] is not None and line["response_ttft_s"] is not None
        assert abs(line["queue_s"] - line["response_queue_s"]) <= 0.002, line
        assert abs(line["prefill_s"] - line["response_ttft_s"]) <= 0.002, line

    # A request over the context: vLLM's reason reaches the record and the summary.
    done = subprocess.run([*base, "--class", "huge", "--json"], capture_output=True, text=True, timeout=120)
    (line,) = [json.loads(x) for x in done.stdout.splitlines()]
    assert done.returncode == 1 and line["status"] == 400
    # vLLM 0.32: "max_tokens=100000 cannot be greater than max_model_len=2048. Please request fewer ..."
    print(f"error_message: {line['error_message']}")
    assert str(MAX_MODEL_LEN) in line["error_message"] and len(line["error_message"]) <= 200, line


async def _until(condition: object, within_s: float) -> bool:
    for _ in range(int(within_s / 0.1)):
        if condition():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.1)
    return bool(condition())  # type: ignore[operator]


@pytest.mark.timeout(900)
async def test_tap_records_join_spans_sent_over_grpc_at_the_collector(
    grpc_vllm: GrpcVllm, tmp_path: Path
) -> None:
    http_port = free_port()
    cfg = LanewatchConfig.model_validate({
        "scrape": {"enabled": False},
        "gpu": {"enabled": False},
        "probe": {"enabled": False},
        "otlp": {"join_wait_s": 20.0, "grpc_listen": f"127.0.0.1:{grpc_vllm.grpc_port}"},
    })  # fmt: skip
    svc = CollectorService(cfg, registry=CollectorRegistry(), source_factory=None)
    seen: list[RequestTiming] = []
    svc.add_listener(seen.append)
    stop, listening = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(svc, "127.0.0.1", http_port, stop, lambda _: listening.set()))
    await asyncio.wait_for(listening.wait(), 30)
    try:
        with start_gateway(
            tmp_path, [f"default={grpc_vllm.url}"], "--collector", f"http://127.0.0.1:{http_port}"
        ) as gw:
            async with httpx.AsyncClient(base_url=gw.url, timeout=120) as client:
                gate = asyncio.Semaphore(4)

                async def one(i: int) -> None:
                    body = {
                        "model": grpc_vllm.model, "max_tokens": 4, "stream": i % 2 == 0, "ignore_eos": True,
                        "messages": [{"role": "user", "content": f"request {i} {uuid.uuid4().hex}"}],
                    }  # fmt: skip
                    async with gate:
                        r = await client.post("/v1/chat/completions", json=body)
                        assert r.status_code == 200, r.text

                await asyncio.gather(*(one(i) for i in range(TAP_REQUESTS)))
            assert await _until(lambda: len(seen) >= TAP_REQUESTS, 120), f"{len(seen)} records"
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
    taps = [r for r in seen if r.source == "tap"]
    joined = [r for r in taps if r.phases_source == "span"]
    assert len(taps) == TAP_REQUESTS and all(r.ok for r in taps)
    print(f"tap records joined over gRPC: {len(joined)}/{TAP_REQUESTS}")
    assert len(joined) >= 0.99 * TAP_REQUESTS, f"{len(joined)}/{TAP_REQUESTS} joined\n{_tail(grpc_vllm)}"
