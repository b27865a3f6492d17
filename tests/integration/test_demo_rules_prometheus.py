"""The demo's rules in a real Prometheus 2.42 at 1 s scrape and evaluation: every rule evaluates
cleanly on realistic series (and the simulator's vLLM series), and a lane whose every request
misses its TTFT pages in seconds."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from lanewatch.alerts.build import GENERATED_DIR
from lanewatch.exporters import names
from tests.prometheus import job, start_prometheus
from tests.servers import start_simulator
from tests.waiting import eventually

pytestmark = pytest.mark.integration  # a real Prometheus on 127.0.0.1

RATE = 4.0  # requests per second per series
FIRE_WITHIN_S = 45.0  # the demo promises ~10-15 s; a loaded CI machine gets a wide margin


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def exposition(elapsed: float) -> str:
    """Counters at `elapsed` seconds: every slow-lane TTFT over 2 s (the fault), the fast lane healthy."""
    n = RATE * elapsed
    lines = []
    for lane in ("fast", "slow"):
        for target in (f"{lane}-a", f"{lane}-b"):
            for cls, mean in (("short", 0.4), ("story", 3.0)):
                base = {"target": target, "lane": lane, "request_class": cls, "model": "m", "source": "probe"}
                good = 0.0 if lane == "slow" else n
                for le, value in (("0.5", good), ("2.0", good), ("+Inf", n)):
                    lines.append(f"{names.TTFT_SECONDS}_bucket{_labels(**base, le=le)} {value}")
                lines.append(f"{names.TTFT_SECONDS}_count{_labels(**base)} {n}")
                for le in ("0.05", "+Inf"):
                    lines.append(f"{names.TPOT_SECONDS}_bucket{_labels(**base, le=le)} {n}")
                lines.append(f"{names.TPOT_SECONDS}_count{_labels(**base)} {n}")
                lines.append(f"{names.E2E_SECONDS}_sum{_labels(**base)} {n * mean}")
                lines.append(f"{names.E2E_SECONDS}_count{_labels(**base)} {n}")
                lines.append(f"{names.REQUESTS_TOTAL}{_labels(**base)} {n}")
                lines.append(f"{names.REQUEST_ERRORS_TOTAL}{_labels(**base, error_kind='http_5xx')} 0")
            lines.append(f"{names.SCRAPE_UP}{_labels(target=target, lane=lane)} 1")
            vllm = _labels(lane=lane, instance=target, model_name="m", engine="0")
            lines.append(f"{names.VLLM_NUM_REQUESTS_WAITING}{vllm} 1")
            lines.append(f"{names.VLLM_KV_CACHE_USAGE_PERC}{vllm} 0.5")
            lines.append(f"{names.VLLM_NUM_PREEMPTIONS_TOTAL}{vllm} 0")
    return "\n".join(lines) + "\n"


@pytest.fixture
def exporter() -> Iterator[str]:
    """A loopback /metrics whose counters grow with wall time."""
    start = time.monotonic()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = exposition(time.monotonic() - start).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _firing(base: str) -> set[tuple[str, str, str]]:
    alerts = httpx.get(f"{base}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    return {
        (a["labels"]["alertname"], a["labels"].get("lane", ""), a["labels"]["severity"])
        for a in alerts
        if a["state"] == "firing"
    }


def test_demo_rules_page_a_failing_lane_and_evaluate_cleanly(tmp_path: Path, exporter: str) -> None:
    with start_simulator(tmp_path, profile="fast") as sim:
        _page_and_evaluate(tmp_path, exporter, sim.url.removeprefix("http://"))


def _page_and_evaluate(tmp_path: Path, exporter: str, sim: str) -> None:
    jobs = [
        job("lanewatch-collector", [exporter]),
        job("vllm-fast", [sim], {"lane": "fast", "target": "sim-fast"}),  # as deploy/prometheus does
    ]
    with start_prometheus(tmp_path, jobs, [GENERATED_DIR / "lanewatch-demo-rules.yml"]) as base:
        started = time.monotonic()
        page = ("LanewatchTTFTBurnRate", "slow", "page")

        def paged() -> set[tuple[str, str, str]]:
            now = _firing(base)
            return now if page in now else set()

        firing = eventually(
            paged,
            FIRE_WITHIN_S,
            "the slow lane's page fires",
            every_s=0.5,
            context=lambda: str(_firing(base)),
        )
        fired_after = time.monotonic() - started
        assert ("LanewatchTTFTBurnRate", "fast", "page") not in firing
        groups = httpx.get(f"{base}/api/v1/rules", timeout=5).json()["data"]["groups"]
        for metric in (names.VLLM_KV_CACHE_USAGE_PERC, names.VLLM_NUM_REQUESTS_WAITING):
            query = f'{metric}{{lane="fast",target="sim-fast",model_name!=""}}'
            found = httpx.get(f"{base}/api/v1/query", params={"query": query}, timeout=5).json()["data"]
            assert found["result"], f"the simulator exposes no {metric}"
    print(f"slow-lane TTFT page fired {fired_after:.1f} s after Prometheus was ready")
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) > 100
    broken = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok" or r.get("lastError")]
    assert not broken
