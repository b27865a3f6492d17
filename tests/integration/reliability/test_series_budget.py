"""10,000 distinct (model, class) combinations through the gateway and through /v1/records: each
/metrics stays under 2 MB and its process under 200 MB RSS, the series budget folds the rest into
`__overflow__` and lanewatch_series_overflow_total says so. Real processes on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from lanewatch.exporters import names
from tests.servers import SimHandle, free_port

from .processes import rss_kib, samples, service, write_yaml

pytestmark = pytest.mark.integration

COMBOS = 10_000
MAX_PAGE = 2 * 1024 * 1024
MAX_RSS_KIB = 200 * 1024


def overflowed(text: str) -> float:
    return sum(v for _, v in samples(text, names.SERIES_OVERFLOW_TOTAL))


def test_collector_records_with_10000_combinations_stay_in_budget(tmp_path: Path) -> None:
    port = free_port()
    cfg = write_yaml(
        tmp_path / "collect.yaml",
        {
            "targets": [],
            "otlp": {"enabled": False},
            "gpu": {"enabled": False},
            "scrape": {"enabled": False},
            "server": {"host": "127.0.0.1", "port": port},
        },
    )
    with service(["collect", "-c", str(cfg)], port, tmp_path / "collect.log", "/healthz") as col:
        for start in range(0, COMBOS, 2000):
            records = [
                {
                    "source": "tap",
                    "target": "gw",
                    "lane": "fast",
                    "request_class": f"c{i % 150}",
                    "model": f"model-{i}",
                    "started_at": time.time(),
                    "status": 200,
                    "ttfb_s": 0.01,
                    "ttft_s": 0.02,
                    "e2e_s": 0.3,
                    "itl_s": [0.01] * 10,
                    "output_tokens": 11,
                }
                for i in range(start, start + 2000)
            ]
            r = httpx.post(f"{col.url}/v1/records", json={"records": records}, timeout=30)
            assert r.status_code == 200 and r.json()["accepted"] == 2000, r.text
        text = col.metrics()
        col.alive()
        rss = rss_kib(col.pid)
    assert sum(v for _, v in samples(text, names.REQUESTS_TOTAL)) == COMBOS  # every request counted
    assert len(text.encode()) < MAX_PAGE, len(text.encode())
    assert overflowed(text) > 0
    assert rss < MAX_RSS_KIB, rss
    print(f"collector: page {len(text.encode())} B, rss {rss} KiB")


def test_gateway_with_10000_combinations_stays_in_budget(tmp_path: Path, sim: SimHandle) -> None:
    port = free_port()
    cfg = write_yaml(
        tmp_path / "gateway.yaml",
        {
            "gateway": {
                "server": {"host": "127.0.0.1", "port": port},
                "lanes": {"sim": {"upstreams": [sim.url]}},
            }
        },
    )
    with service(["gateway", "-c", str(cfg)], port, tmp_path / "gateway.log", "/metrics") as gw:
        errors: list[str] = []

        def client(k: int) -> None:
            with httpx.Client(base_url=gw.url, timeout=30) as c:
                for i in range(k, COMBOS, 8):
                    # every 20th the served model (histograms), the rest unknown models (404: counters)
                    model = sim.model if i % 20 == 0 else f"model-{i}"
                    body = {"model": model, "messages": [{"role": "user", "content": "x"}], "max_tokens": 1}
                    headers = {"x-lanewatch-class": f"c{i % 150}", "content-type": "application/json"}
                    r = c.post("/v1/chat/completions", content=json.dumps(body), headers=headers)
                    if r.status_code not in (200, 404):
                        errors.append(f"{r.status_code} {r.text[:200]}")

        started = time.monotonic()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        flood_s = time.monotonic() - started
        assert not errors, errors[:3]
        deadline = time.monotonic() + 20
        text = gw.metrics()
        while sum(v for _, v in samples(text, names.REQUESTS_TOTAL)) < COMBOS and time.monotonic() < deadline:
            time.sleep(0.2)
            text = gw.metrics()
        t0 = time.perf_counter()
        gw.metrics()
        scrape_s = time.perf_counter() - t0
        gw.alive()
        rss = rss_kib(gw.pid)
    assert sum(v for _, v in samples(text, names.REQUESTS_TOTAL)) == COMBOS
    assert len(text.encode()) < MAX_PAGE, len(text.encode())
    assert rss < MAX_RSS_KIB, rss
    print(
        f"flood {flood_s:.1f} s, page {len(text.encode())} B, scrape {scrape_s * 1e3:.0f} ms, rss {rss} KiB"
    )
