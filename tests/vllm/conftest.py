"""One real `vllm serve` per test session (the tiny model), its span relay, and a loud skip without them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.missing import missing

from .engine import PER_REQUEST_METRICS, Install, VllmHandle, find_install, start_vllm, supports_flag
from .relay import SpanRelay


@pytest.fixture(scope="session")
def vllm_install() -> Install:
    """The cached vLLM from `make vllm`; skip loudly without it (fail under CI=true)."""
    inst, why = find_install()
    if inst is None:
        missing(f"real-vLLM tests need the CPU build: {why}")
    return inst


@pytest.fixture(scope="session")
def span_relay() -> Iterator[SpanRelay]:
    """Where the session's vLLM sends its spans (OTLP/gRPC, its default)."""
    relay = SpanRelay()
    yield relay
    relay.close()


@pytest.fixture(scope="session")
def vllm_server(
    vllm_install: Install, span_relay: SpanRelay, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VllmHandle]:
    """`vllm serve` of the tiny model in its default span mode (gRPC) to the relay; its log is kept."""
    extra = [PER_REQUEST_METRICS] if supports_flag(vllm_install, PER_REQUEST_METRICS) else []
    folder = tmp_path_factory.mktemp("vllm")
    with start_vllm(vllm_install, folder, "tiny", span_relay.url, *extra) as handle:
        yield handle


@pytest.fixture
def vllm_log(vllm_server: VllmHandle) -> Iterator[None]:
    """Print the server's log tail when a test fails (pytest shows captured output then)."""
    yield
    print(f"--- vllm log ({vllm_server.log_path}), last 40 lines ---")
    print("\n".join(vllm_server.log().splitlines()[-40:]))
