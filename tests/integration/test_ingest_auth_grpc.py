"""OTLP/gRPC behind reporters' tokens: Envoy's access log (LogsService/Export) only from a credential
with the `envoy` feed, handed on under that reporter's name; spans from any credential; nothing open."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest

from lanewatch.collector.collect.credentials import Credential, IngestAuth
from lanewatch.collector.collect.otlp_grpc import METHOD, SERVICE, GrpcSpanReceiver
from lanewatch.collector.collect.otlp_logs import LOGS_SERVICE, LogsAdmission

pytestmark = pytest.mark.integration

AUTH = IngestAuth(
    None,
    [
        (Credential("envoy-eu", frozenset({"envoy"})), "edge-t0k"),
        (Credential("gw", frozenset({"progress", "tap"})), "gw-t0k"),
    ],
)


async def call(port: int, service: str, token: str | None) -> grpc.StatusCode:
    """One Export call with an empty message; the status it got."""
    metadata = (("authorization", f"Bearer {token}"),) if token is not None else None
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        export: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(f"/{service}/{METHOD}")
        try:
            await export(b"", metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


async def test_logs_need_the_envoy_feed_and_carry_the_senders_name() -> None:
    logs: list[tuple[LogsAdmission, str | None]] = []
    receiver = GrpcSpanReceiver(
        "127.0.0.1", 0, lambda spans: None, token=AUTH, on_logs=lambda a, who: logs.append((a, who))
    )
    port = await receiver.start()
    try:
        assert await call(port, LOGS_SERVICE, None) == grpc.StatusCode.UNAUTHENTICATED
        assert await call(port, LOGS_SERVICE, "guess") == grpc.StatusCode.UNAUTHENTICATED
        assert await call(port, LOGS_SERVICE, "gw-t0k") == grpc.StatusCode.PERMISSION_DENIED
        assert logs == []
        assert await call(port, LOGS_SERVICE, "edge-t0k") == grpc.StatusCode.OK
        assert [who for _, who in logs] == ["envoy-eu"]
        assert await call(port, SERVICE, None) == grpc.StatusCode.UNAUTHENTICATED
        assert await call(port, SERVICE, "gw-t0k") == grpc.StatusCode.OK  # spans: any credential
    finally:
        await receiver.shutdown()
