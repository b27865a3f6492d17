"""A 60-second soak: the collector and the gateway under traffic with faults keep their memory bounded.

The simulator fails a share of requests in every way it can (error statuses, truncated and
malformed streams, stalls); the collector probes it directly, through the gateway and on a
port where nothing listens, receives its spans and scrapes it; clients stream through the
gateway with ever new model names and some hang up mid-stream. Both services' RSS
(/proc/<pid>/status VmRSS) is sampled each second. Their window, join and label sets fill
in the first half (windows of 10 s), so the second half must hold steady: its ~400 requests
per service may add at most 6 MiB, which a buffer that grows with time, or a leak of ~15 KiB
per request, exceeds (measured growth: a few hundred KiB).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import SimHandle, closed_port, free_port, start_simulator

from .processes import Service, rss_kib, samples, service, write_yaml

pytestmark = pytest.mark.integration

SOAK_S = 60.0
# Generous: the allocator keeps freed memory in its pools; growth from a leak does not stop.
SECOND_HALF_GROWTH_KIB = 6 * 1024
FAULTS = {
    "error_rates": {"429": 0.03, "500": 0.03, "503": 0.03},
    "truncate_after_tokens": 3,
    "truncate_rate": 0.05,
    "malformed_after_tokens": 2,
    "malformed_rate": 0.05,
    "stall_s": 0.6,
    "stall_after_tokens": 2,
    "stall_rate": 0.03,
}


@contextmanager
def stack(tmp_path: Path) -> Iterator[tuple[SimHandle, Service, Service]]:
    """The simulator (faults on, spans to the collector), the gateway in front of it, the collector."""
    col_port, gw_port = free_port(), free_port()
    spans = f"http://127.0.0.1:{col_port}/v1/traces"
    with start_simulator(tmp_path, otlp_endpoint=spans, faults=FAULTS, seed=7) as sim:
        down = f"http://127.0.0.1:{closed_port()}"
        gw_cfg = write_yaml(
            tmp_path / "gateway.yaml",
            {
                "gateway": {
                    "server": {"host": "127.0.0.1", "port": gw_port},
                    "lanes": {"sim": {"upstreams": [sim.url]}, "down": {"upstreams": [down]}},
                    "read_timeout_s": 0.4,  # the stall fault (0.6 s) trips it
                    "hints": {
                        "trusted_networks": ["127.0.0.0/8"]
                    },  # the test chooses lanes with x-lanewatch-lane
                },
                "export": {"max_label_values": 20},
            },
        )
        col_cfg = write_yaml(tmp_path / "collect.yaml", collector_config(sim, gw_port, col_port, down))
        gw_args = ["gateway", "-c", str(gw_cfg), "--records", str(tmp_path / "tap.jsonl")]
        col_args = ["collect", "-c", str(col_cfg), "--records", str(tmp_path / "records.jsonl")]
        with (
            service(gw_args, gw_port, tmp_path / "gateway.log", "/metrics") as gw,
            service(col_args, col_port, tmp_path / "collect.log", "/healthz") as col,
        ):
            yield sim, gw, col


def collector_config(sim: SimHandle, gw_port: int, col_port: int, down: str) -> dict[str, Any]:
    gw = f"http://127.0.0.1:{gw_port}"
    return {
        "targets": [
            {"name": "sim", "url": sim.url, "lane": "sim", "model": sim.model},
            {"name": "via-gateway", "url": gw, "lane": "sim", "model": sim.model, "scrape": False},
            {"name": "down", "url": down, "lane": "down", "model": sim.model},
        ],
        "probe": {
            "interval_s": 0.2,
            "timeouts": {"connect_s": 2.0, "ttft_s": 1.0, "stall_s": 0.4, "total_s": 3.0},
            "classes": [{"name": "short", "prompt_words": 8, "max_tokens": 8}],
        },
        "scrape": {"interval_s": 0.5, "timeout_s": 1.0, "window_s": 10.0},
        "otlp": {"join_wait_s": 0.5},
        "export": {"window_s": 10.0, "max_label_values": 20},
        "gpu": {"enabled": False},
        "server": {"host": "127.0.0.1", "port": col_port},
    }


class Traffic:
    """Clients of the gateway (~10 requests/s) and a Prometheus-like scraper, until stopped."""

    def __init__(self, gw: Service, col: Service, model: str) -> None:
        self.gw, self.col, self.model = gw, col, model
        self.stop = threading.Event()
        self.sent = self.hung_up = self.scrapes = 0
        self.errors: list[str] = []
        self._threads = [threading.Thread(target=self._clients), threading.Thread(target=self._scraper)]

    def __enter__(self) -> Traffic:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(30)

    def _clients(self) -> None:
        rng = random.Random(3)
        with httpx.Client(base_url=self.gw.url, timeout=10) as c:
            while not self.stop.wait(0.1):
                n = self.sent
                self.sent += 1
                model = self.model if n % 2 else f"flood-model-{n}"  # a new name every other request
                body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": f"q{n}"}]}
                body |= {"max_tokens": rng.randint(1, 12), "stream": True, "ignore_eos": True}
                lane = "down" if n % 17 == 0 else "sim"
                try:
                    with c.stream(
                        "POST", "/v1/chat/completions", json=body, headers={"x-lanewatch-lane": lane}
                    ) as r:
                        if n % 9 == 0:  # hang up after the head
                            self.hung_up += 1
                            continue
                        r.read()
                except httpx.HTTPError as exc:
                    self.errors.append(repr(exc))

    def _scraper(self) -> None:
        while not self.stop.wait(1.0):
            for svc in (self.gw, self.col):
                try:
                    svc.metrics()
                    self.scrapes += 1
                except httpx.HTTPError as exc:
                    self.errors.append(repr(exc))


def growth(series: list[int]) -> tuple[int, int]:
    """(first half, second half) growth of a series of samples."""
    mid = len(series) // 2
    return series[mid] - series[0], series[-1] - series[mid]


def test_sixty_seconds_of_faults_and_traffic_keep_memory_bounded(tmp_path: Path) -> None:
    rss: dict[str, list[int]] = {"collector": [], "gateway": []}
    with stack(tmp_path) as (sim, gw, col), Traffic(gw, col, sim.model) as traffic:
        deadline = time.monotonic() + SOAK_S
        while time.monotonic() < deadline:
            gw.alive()
            col.alive()
            rss["collector"].append(rss_kib(col.pid))
            rss["gateway"].append(rss_kib(gw.pid))
            time.sleep(1.0)
        col_text, gw_text = col.metrics(), gw.metrics()
    figures = {name: {"start": s[0], "mid": s[len(s) // 2], "end": s[-1]} for name, s in rss.items()}
    print(f"\nsoak RSS KiB: {json.dumps(figures)}; {traffic.sent} gateway requests")
    assert not traffic.errors, traffic.errors[:5]
    assert traffic.sent > 200 and traffic.scrapes > 50
    for name, series in rss.items():
        first, second = growth(series)
        assert second < SECOND_HALF_GROWTH_KIB, (name, first, second, series)
    # the soak did what it says: every source ran, faults were counted, labels stayed capped
    for text in (col_text, gw_text):
        kinds = {labels["error_kind"] for labels, _ in samples(text, "lanewatch_request_errors_total")}
        assert {"http_5xx", "http_429", "truncated", "bad_stream", "connect_refused"} <= kinds, kinds
    models = {labels["model"] for labels, _ in samples(gw_text, "lanewatch_requests_total")}
    assert len(models) <= 21 and "__overflow__" in models
    joined = samples(col_text, "lanewatch_otlp_spans_joined_total")
    assert joined and joined[0][1] > 50
