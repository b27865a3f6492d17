"""OTLP/gRPC in: vLLM's default span protocol received by the collector and the prober on loopback."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import grpc
import grpc.aio
import httpx
import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.collect.otlp_grpc import METHOD, SERVICE, GrpcSpanReceiver, ThreadedGrpcReceiver
from lanewatch.collector.record.evidence import ServerSpan
from tests.servers import free_port, lanewatch_command, start_simulator
from tests.unit.collector.collect.test_otlp import protobuf_body, sdk_spans

from .test_probe_cli import lanewatch
from .test_probe_join import PHASES, assert_phases_match_truth

pytestmark = pytest.mark.integration

UNDECODABLE = b"\x0a\xff\xff\xff\x0f"  # field 1, a length far past the end


async def export(port: int, body: bytes, compression: grpc.Compression | None = None) -> grpc.StatusCode:
    """Send raw bytes as one Export call; the status it got."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(f"/{SERVICE}/{METHOD}")
        try:
            await call(body, compression=compression, timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


def export_sync(port: int, body: bytes, compression: grpc.Compression | None = None) -> grpc.StatusCode:
    """`export` from a thread without a loop (for a collector in another process)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(f"/{SERVICE}/{METHOD}")
        try:
            call(body, compression=compression, timeout=10)
        except grpc.RpcError as exc:
            code: grpc.StatusCode = exc.code()
            return code
        return grpc.StatusCode.OK


async def test_receiver_takes_the_sdk_exporter_and_refuses_bad_input_changing_nothing() -> None:
    got: list[list[ServerSpan]] = []
    receiver = GrpcSpanReceiver("127.0.0.1", 0, got.append, max_message_bytes=4096)
    port = await receiver.start()
    try:
        # vLLM's own exporter class, as vLLM builds it (gRPC, insecure).
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}", insecure=True, timeout=5)
        spans = sdk_spans(3)
        assert await _in_thread(exporter.export, spans) is SpanExportResult.SUCCESS
        exporter.shutdown()
        assert [s.trace_id for batch in got for s in batch] == [
            format(s.context.trace_id, "032x") for s in spans
        ]
        got.clear()

        assert await export(port, UNDECODABLE) is grpc.StatusCode.INVALID_ARGUMENT
        big = protobuf_body(sdk_spans(60))
        assert len(big) > 4096
        assert await export(port, big) is grpc.StatusCode.RESOURCE_EXHAUSTED
        # Small on the wire, over the limit once inflated: refused as well.
        assert len(gzip.compress(big)) < 4096
        assert await export(port, big, grpc.Compression.Gzip) is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert got == []  # nothing refused reached the join

        assert await export(port, protobuf_body(sdk_spans(1))) is grpc.StatusCode.OK
        assert len(got) == 1 and len(got[0]) == 1
    finally:
        await receiver.shutdown()


async def test_a_taken_port_is_an_os_error_not_a_second_listener() -> None:
    first = GrpcSpanReceiver("127.0.0.1", 0, lambda spans: None)
    port = await first.start()
    try:
        with pytest.raises(OSError, match=rf"127\.0\.0\.1:{port}"):
            await GrpcSpanReceiver("127.0.0.1", port, lambda spans: None).start()
        threaded = ThreadedGrpcReceiver("127.0.0.1", port, lambda spans: None)
        with pytest.raises(OSError, match=r"cannot bind 127\.0\.0\.1"):
            threaded.start()
    finally:
        await first.shutdown()


async def _in_thread(fn: object, *args: object) -> object:
    import asyncio

    assert callable(fn)
    return await asyncio.to_thread(fn, *args)


async def test_probe_joins_every_span_the_simulator_sends_over_grpc(tmp_path: Path) -> None:
    port = free_port()
    with start_simulator(tmp_path, otlp_endpoint=f"http://127.0.0.1:{port}", otlp_protocol="grpc") as sim:
        code, out, err = await lanewatch(
            "probe", sim.url, "-m", sim.model, "-n", "12", "--class", "short", "--json",
            "--otlp-grpc-listen", f"127.0.0.1:{port}",
        )  # fmt: skip
        assert code == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert len(lines) == 12 and all(line["error"] is None for line in lines)
        assert all(line[f"{p}_s"] is not None for line in lines for p in PHASES), out
        assert_phases_match_truth(sim, lines)
        assert f"--otlp-traces-endpoint http://127.0.0.1:{port} " in err and "OTLP/gRPC" in err


async def test_probe_refuses_a_taken_grpc_port(tmp_path: Path) -> None:
    taken = GrpcSpanReceiver("127.0.0.1", 0, lambda spans: None)
    port = await taken.start()
    try:
        code, _, err = await lanewatch(
            "probe", "http://127.0.0.1:9", "-m", "m", "--otlp-grpc-listen", str(port)
        )
        assert code == 2 and f"--otlp-grpc-listen {port}: cannot listen" in err
    finally:
        await taken.shutdown()


def _spans_received(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "lanewatch_otlp_spans_received_total":
                return sample.value
    raise AssertionError("no lanewatch_otlp_spans_received_total")


def _collect(
    tmp_path: Path, cfg: dict[str, object], http_port: int, grpc_port: int
) -> subprocess.Popen[bytes]:
    path = tmp_path / "collect.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with (tmp_path / "collect.log").open("wb") as log:
        return subprocess.Popen(
            [*lanewatch_command(), "collect", "-c", str(path), "--port", str(http_port),
             "--records", str(tmp_path / "records.jsonl"), "--otlp-grpc-listen", f"127.0.0.1:{grpc_port}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_collect_joins_the_spans_the_simulator_sends_over_grpc(tmp_path: Path) -> None:
    http_port, grpc_port = free_port(), free_port()
    with start_simulator(
        tmp_path, otlp_endpoint=f"http://127.0.0.1:{grpc_port}", otlp_protocol="grpc"
    ) as sim:
        proc = _collect(tmp_path, {
            "targets": [{"name": "sim", "url": sim.url, "lane": "fast", "model": sim.model}],
            "probe": {"interval_s": 0.1, "classes": [{"name": "short", "prompt_words": 8, "max_tokens": 4}]},
            "scrape": {"enabled": False},
            "gpu": {"enabled": False},
        }, http_port, grpc_port)  # fmt: skip
        records, log = tmp_path / "records.jsonl", tmp_path / "collect.log"
        try:
            deadline, joined = time.monotonic() + 30, 0
            while time.monotonic() < deadline and joined < 5:
                time.sleep(0.2)
                assert proc.poll() is None, log.read_text()
                if records.exists():
                    lines = [json.loads(line) for line in records.read_text().splitlines()]
                    joined = sum(line["queue_s"] is not None for line in lines)
            assert joined >= 5, log.read_text()
            assert f"OTLP/gRPC spans at http://127.0.0.1:{grpc_port}" in log.read_text()
            _stop(proc)
            assert proc.returncode == 0, log.read_text()
        finally:
            _stop(proc)


def test_collect_answers_bad_grpc_input_with_clear_statuses_and_changes_nothing(tmp_path: Path) -> None:
    http_port, grpc_port = free_port(), free_port()
    proc = _collect(
        tmp_path, {"gpu": {"enabled": False}, "otlp": {"max_body_bytes": 4096}}, http_port, grpc_port
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "collect.log").read_text()
            try:
                assert _spans_received(http_port) == 0
                break
            except httpx.TransportError:
                time.sleep(0.1)
        big = protobuf_body(sdk_spans(60))
        assert export_sync(grpc_port, UNDECODABLE) is grpc.StatusCode.INVALID_ARGUMENT
        assert export_sync(grpc_port, big) is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert export_sync(grpc_port, big, grpc.Compression.Gzip) is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert _spans_received(http_port) == 0  # refused input counted nothing, held nothing
        assert httpx.get(f"http://127.0.0.1:{http_port}/healthz").json()["join_pending"]["spans"] == 0
        assert export_sync(grpc_port, protobuf_body(sdk_spans(2))) is grpc.StatusCode.OK
        assert _spans_received(http_port) == 2
        assert httpx.get(f"http://127.0.0.1:{http_port}/healthz").json()["join_pending"]["spans"] == 2
    finally:
        _stop(proc)
