"""OTLP/gRPC `LogsService/Export` on the collector's gRPC listener: the token, refusal, a bound."""

from __future__ import annotations

from pathlib import Path

import grpc
import grpc.aio
import httpx
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from lanewatch.collector.collect.otlp_logs import LOGS_SERVICE
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.record.files import read_records
from tests.unit.collector.collect.test_otlp_logs import good, log_record, logs_body

from .test_collect_http import running

pytestmark = pytest.mark.integration

TOKEN = "s3cret-logs-token"
BEARER = (("authorization", f"Bearer {TOKEN}"),)


async def export(
    port: int, payload: bytes, metadata: tuple[tuple[str, str], ...] = ()
) -> tuple[grpc.StatusCode, ExportLogsServiceResponse | None]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(f"/{LOGS_SERVICE}/Export")
        try:
            answer = await call(payload, metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code(), None
        return grpc.StatusCode.OK, ExportLogsServiceResponse.FromString(answer)


async def test_logs_over_grpc_need_the_token_refuse_bad_records_alone_and_keep_to_the_bound(
    tmp_path: Path,
) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    cfg = LanewatchConfig(
        gpu={"enabled": False},
        otlp={"grpc_listen": "127.0.0.1:0", "max_log_records_per_request": 4},
        ingest={"token_file": str(tmp_path / "token")},
        export={"records_path": str(tmp_path / "records.jsonl")},
    )
    async with running(cfg) as (svc, url):
        assert svc.grpc_port is not None
        body = logs_body([*good(2), log_record(duration_ms="NaN"), *good(3)])
        assert (await export(svc.grpc_port, body))[0] is grpc.StatusCode.UNAUTHENTICATED
        wrong = (("authorization", "Bearer nope"),)
        assert (await export(svc.grpc_port, body, wrong))[0] is grpc.StatusCode.UNAUTHENTICATED
        assert svc.logs_refused == 0
        code, answer = await export(svc.grpc_port, body, BEARER)
        assert code is grpc.StatusCode.OK and answer is not None
        # one NaN refused alone; of the five good ones four are taken (the bound), one refused
        assert answer.partial_success.rejected_log_records == 2
        assert "duration_ms" in answer.partial_success.error_message
        assert (await export(svc.grpc_port, b"\x0a\xff\xff", BEARER))[0] is grpc.StatusCode.INVALID_ARGUMENT
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{url}/healthz")).status_code == 200
    records = read_records(tmp_path / "records.jsonl").records
    assert len(records) == 4 and all(r.source == "envoy" and r.status == 503 for r in records)
    assert svc.logs_refused == 2
