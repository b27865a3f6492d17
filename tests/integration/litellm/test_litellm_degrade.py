"""The degrade controller's `litellm` adapter drives a real LiteLLM proxy through lanewatch's handler.

The adapter PUTs a state to the handler's endpoint and reads back the revision the proxy holds;
then, through the proxy: the slow lane's requests (shift 100 %) are served by the fast lane's
model group and deployment, the fast lane's cap clamps max_tokens (the usage shows the cap), a
class the fast lane sheds (batch by the handler's default rules, whatever the client's class
header claims) gets a 429 with Retry-After and lanewatch's error type, and each of
those requests is one record at the collector (the shed one an http_429 of its class: LiteLLM
logs a pre-call refusal as a failure event).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from lanewatch.collector.degrade.adapters.litellm import LitellmSettings
from lanewatch.collector.degrade_state.wire import LaneDegrade
from lanewatch.collector.record.timing import ErrorKind
from tests.litellm import litellm_python, start_proxy
from tests.servers import free_port, start_simulator
from tests.waiting import eventually_async

from .test_litellm_records import chat, collector

pytestmark = pytest.mark.integration

CAP = 4


async def test_shift_cap_and_shed_through_the_handler_and_the_read_back(tmp_path: Path) -> None:
    litellm_python()
    port, admin_port = free_port(), free_port()
    admin_token = tmp_path / "admin-token"
    admin_token.write_text("handler-admin\n")
    with (
        start_simulator(tmp_path, profile="fast", model="fast") as fast,
        start_simulator(tmp_path, profile="slow", model="slow") as slow,
    ):
        groups = {"fast": (fast.url, "fast"), "slow": (slow.url, "slow")}
        settings = {
            "collector_url": f"http://127.0.0.1:{port}",
            "token_file": str(tmp_path / "ingest-token"),
            "lanes": {"fast": "fast", "slow": "slow"},
            "interval_s": 0.2,
            "admin_port": admin_port,
            "admin_token_file": str(admin_token),
        }
        async with collector(port, tmp_path) as seen:
            with start_proxy(tmp_path / "litellm", groups, settings) as proxy:
                admin_url = f"http://127.0.0.1:{admin_port}"
                adapter = LitellmSettings(url=admin_url, token_file=admin_token).build()
                state = {
                    "slow": LaneDegrade(shift_to="fast", shift_percent=100.0),
                    "fast": LaneDegrade(cap_max_tokens=CAP, shed_classes=("batch",)),
                }
                try:
                    await adapter.apply(state, revision=7)
                    view = await adapter.read_back()
                finally:
                    await adapter.shutdown()
                assert view is not None and (view.revision, view.lanes) == (7, state)
                assert view.lane_order == ("fast", "slow")
                async with httpx.AsyncClient(base_url=proxy.url, timeout=60) as client:
                    shifted = await client.post("/v1/chat/completions", json=chat("slow", stream=False))
                    assert shifted.status_code == 200, shifted.text
                    assert shifted.json()["usage"]["completion_tokens"] == CAP  # shifted, then capped
                    shed = await client.post(  # batch by the default rules (max_tokens >= 1024); its
                        # claim to be interactive counts for nothing: the class header is not trusted
                        "/v1/chat/completions",
                        json={**chat("fast", stream=False), "max_tokens": 2048},
                        headers={"x-lanewatch-class": "interactive"},
                    )
                    unauthorized = await client.get(f"{admin_url}/admin/degrade")
                await eventually_async(lambda: len(seen) >= 2, 30, f"2 records ({proxy.log_path})")
    assert unauthorized.status_code == 401
    assert shed.status_code == 429, shed.text
    assert shed.headers["retry-after"] == "1" and shed.headers["x-lanewatch-degraded"] == "shed"
    assert shed.json()["error"]["type"] == "RateLimitError"
    assert len(seen) == 2
    (served,) = [r for r in seen if r.ok]
    (refused,) = [r for r in seen if not r.ok]
    assert (served.lane, served.model, served.attrs.get("deployment"), served.output_tokens) == (
        "fast",
        "fast",
        "fast-deployment",
        CAP,
    )
    assert (refused.lane, refused.request_class, refused.status, refused.error) == (
        "fast",
        "batch",
        429,
        ErrorKind.HTTP_429,
    )
