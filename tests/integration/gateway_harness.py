"""Test upstreams and gateways: in the test's event loop on ephemeral ports, or as subprocesses."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from lanewatch.collector.gateway import Gateway, GatewayServer
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.record.timing import RequestTiming
from tests.servers import free_port, lanewatch_command, run_service, serve_app
from tests.sse_upstream import SseUpstream

# The gateway's `hints` for tests that choose a lane or class with the headers themselves.
TRUST_LOOPBACK: dict[str, Any] = {"trusted_networks": ["127.0.0.0/8", "::1/128"]}


@asynccontextmanager
async def upstream_server(**kw: Any) -> AsyncIterator[tuple[SseUpstream, str]]:
    """The test upstream, served until the block ends."""
    up = SseUpstream(**kw)
    runner, url = await serve_app(up.app, handler_cancellation=True)
    try:
        yield up, url
    finally:
        await runner.cleanup()


@dataclass
class RunningGateway:
    """A gateway under test: its URL, its state and the records its tap made."""

    url: str
    gw: Gateway
    records: list[RequestTiming] = field(default_factory=list)


@asynccontextmanager
async def gateway_server(lanes: dict[str, Any], **cfg: Any) -> AsyncIterator[RunningGateway]:
    """A gateway over `lanes` (name -> upstream URLs, or a LaneConfig dict) with more GatewayConfig fields;
    `ttft_slos` (lane -> seconds, not a config field) turns the rescue of late requests on for those lanes."""
    ttft_slos: dict[str, float] | None = cfg.pop("ttft_slos", None)
    lane_cfg = {k: v if isinstance(v, dict) else {"upstreams": v} for k, v in lanes.items()}
    config = GatewayConfig.model_validate({"lanes": lane_cfg, **cfg})
    records: list[RequestTiming] = []
    gw = Gateway(config, on_record=records.append, ttft_slos=ttft_slos)
    server = GatewayServer(gw)
    port = await server.start("127.0.0.1", 0)
    try:
        yield RunningGateway(f"http://127.0.0.1:{port}", gw, records)
    finally:
        await server.shutdown()


def chat_body(max_tokens: int = 4, stream: bool = True, content: str = "hi", **extra: Any) -> dict[str, Any]:
    """A chat completions request body."""
    body = {"model": "test-model", "max_tokens": max_tokens, "stream": stream, **extra}
    body["messages"] = [{"role": "user", "content": content}]
    return body


async def read_events(resp: Any) -> list[tuple[float, bytes]]:
    """Each SSE event of a streamed aiohttp response with the monotonic time it became complete."""

    events: list[tuple[float, bytes]] = []
    buf = b""
    async for data in resp.content.iter_any():
        now = time.monotonic()
        buf += data
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            events.append((now, event))
    return events


async def eventually(condition: Callable[[], bool], within_s: float = 3.0) -> bool:
    """Whether `condition` holds within `within_s` seconds (checked every 10 ms)."""
    import asyncio

    for _ in range(int(within_s / 0.01)):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


@asynccontextmanager
async def one_lane(
    first_ms: float = 1.0, gap_ms: float = 1.0, **cfg: Any
) -> AsyncIterator[tuple[SseUpstream, RunningGateway, aiohttp.ClientSession]]:
    """A test upstream as lane `slow` of a gateway, and a client session."""
    async with (
        upstream_server(first_ms=first_ms, gap_ms=gap_ms) as (up, url),
        gateway_server({"slow": [url]}, **cfg) as g,
        aiohttp.ClientSession() as s,
    ):
        yield up, g, s


@dataclass(frozen=True)
class GatewayProcess:
    """`lanewatch gateway` running as a subprocess."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path


@contextmanager
def start_gateway(tmp_path: Path, upstreams: list[str], *extra: str) -> Iterator[GatewayProcess]:
    """Run `lanewatch gateway --upstream LANE=URL ...` on a free port until the block exits."""
    port = free_port()
    args = [*lanewatch_command(), "gateway", "--host", "127.0.0.1", "--port", str(port)]
    for flag in upstreams:
        args += ["--upstream", flag]
    log_path = tmp_path / f"gateway-{port}.log"
    url = f"http://127.0.0.1:{port}"
    with run_service([*args, *extra], log_path, f"{url}/healthz") as proc:
        yield GatewayProcess(url, proc, log_path)


@contextmanager
def start_test_upstream(tmp_path: Path, first_ms: float, gap_ms: float) -> Iterator[str]:
    """Run tests/sse_upstream.py as a subprocess on a free port; yields its URL."""
    port = free_port()
    args = [sys.executable, "-m", "tests.sse_upstream", "--port", str(port)]
    args += ["--first-ms", str(first_ms), "--gap-ms", str(gap_ms)]
    url = f"http://127.0.0.1:{port}"
    root = Path(__file__).resolve().parents[2]
    with run_service(args, tmp_path / f"upstream-{port}.log", f"{url}/health", cwd=root):
        yield url
