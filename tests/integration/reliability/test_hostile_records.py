"""Hostile label values through real processes on 127.0.0.1: a lone surrogate for a model name, a
100 KB label, and one bad record among good ones.

Each once broke something: `"model": "\\ud800"` made every later scrape of the gateway's /metrics
answer 500 and the simulator answer with a traceback; the same record made the collector refuse
its whole batch (21 records, 20 of them other clients') and left a tap JSONL line that
`lanewatch report` could not read; a 100 KB label grew the collector's /metrics by 41 MB.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from lanewatch.collector.record.files import read_records
from lanewatch.collector.record.rules import MAX_LABEL_CHARS
from lanewatch.exporters import names
from tests.servers import SimHandle, free_port, lanewatch_command

from .processes import samples, service, write_yaml

pytestmark = pytest.mark.integration

SURROGATE_BODY = b'{"model": "\\ud800", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}'


def chat(url: str, body: bytes) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/chat/completions", content=body, headers={"content-type": "application/json"}, timeout=10
    )


def test_the_simulator_answers_a_lone_surrogate_model_with_a_404(sim: SimHandle) -> None:
    r = chat(sim.url, SURROGATE_BODY)
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"


def test_one_surrogate_model_loses_no_record_and_breaks_no_reader(tmp_path: Path, sim: SimHandle) -> None:
    col_port, gw_port = free_port(), free_port()
    col_cfg = write_yaml(
        tmp_path / "collect.yaml",
        {
            "targets": [],
            "otlp": {"enabled": False},
            "gpu": {"enabled": False},
            "scrape": {"enabled": False},
            "server": {"host": "127.0.0.1", "port": col_port},
        },
    )
    gw_cfg = write_yaml(
        tmp_path / "gateway.yaml",
        {
            "gateway": {
                "server": {"host": "127.0.0.1", "port": gw_port},
                "lanes": {"sim": {"upstreams": [sim.url]}},
                "collector_url": f"http://127.0.0.1:{col_port}",
                "shipping": {"batch_records": 21, "interval_s": 0.2},
            }
        },
    )
    tap_file = tmp_path / "tap.jsonl"
    with (
        service(["collect", "-c", str(col_cfg)], col_port, tmp_path / "collect.log", "/healthz") as col,
        service(
            ["gateway", "-c", str(gw_cfg), "--records", str(tap_file)],
            gw_port,
            tmp_path / "gw.log",
            "/metrics",
        ) as gw,
    ):
        assert gw.metrics()  # 200 before
        good = json.dumps(
            {
                "model": sim.model,
                "messages": [{"role": "user", "content": "x"}],
                "max_tokens": 2,
                "stream": True,
            }
        ).encode()

        def clients(k: int) -> None:
            for _ in range(5):
                assert chat(gw.url, good).status_code == 200

        threads = [threading.Thread(target=clients, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        assert chat(gw.url, SURROGATE_BODY).status_code == 404
        for t in threads:
            t.join(60)
        assert gw.metrics()  # and 200 after
        deadline_text = ""
        for _ in range(100):
            deadline_text = col.metrics()
            if sum(v for _, v in samples(deadline_text, names.REQUESTS_TOTAL)) >= 21:
                break
            threading.Event().wait(0.1)
        gw_text = gw.metrics()
        gw.alive()
        col.alive()
    assert sum(v for _, v in samples(deadline_text, names.REQUESTS_TOTAL)) == 21  # all 21 kept
    models = {labels["model"] for labels, _ in samples(deadline_text, names.REQUESTS_TOTAL)}
    assert models == {sim.model, "\ufffd"}
    dropped = {
        labels["reason"]: v for labels, v in samples(gw_text, names.GATEWAY_SHIP_DROPPED_RECORDS_TOTAL)
    }
    assert dropped["rejected"] == 0 and dropped["refused"] == 0
    assert len(read_records(tap_file).records) == 21  # every line a record
    report = subprocess.run(
        [*lanewatch_command(), "report", str(tap_file), "-o", str(tmp_path / "report.html")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert report.returncode == 0, report.stderr


def test_a_100_kb_label_stays_a_128_character_label(tmp_path: Path) -> None:
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
    record = {
        "source": "tap", "target": "gw", "lane": "fast", "request_class": "c", "model": "m" * 100_000,
        "started_at": time.time(), "status": 200, "ttft_s": 0.02, "e2e_s": 0.3, "output_tokens": 4,
    }  # fmt: skip
    with service(["collect", "-c", str(cfg)], port, tmp_path / "collect.log", "/healthz") as col:
        before = len(col.metrics().encode())
        r = httpx.post(f"{col.url}/v1/records", json={"records": [record]}, timeout=30)
        assert r.status_code == 200 and r.json()["accepted"] == 1
        text = col.metrics()
    models = {labels["model"] for labels, _ in samples(text, names.REQUESTS_TOTAL)}
    assert models == {"m" * MAX_LABEL_CHARS}
    assert len(text.encode()) - before < 200_000  # one combination's series, not 41 MB
