"""`lanewatch collect` as users run it: a subprocess, a config file, SIGTERM to stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from lanewatch.collector.record.files import read_records
from tests.servers import free_port, lanewatch_command, start_simulator, started
from tests.waiting import eventually

pytestmark = pytest.mark.integration


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*lanewatch_command(), *args], capture_output=True, text=True, timeout=60)


def test_bad_config_names_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("otlp:\n  join_wait: 3\n")
    result = run_cli("collect", "-c", str(cfg))
    assert result.returncode == 2
    assert "otlp.join_wait" in result.stderr and "line 2" in result.stderr


def test_bad_shard_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "ok.yaml"
    cfg.write_text("gpu:\n  enabled: false\n")
    result = run_cli("collect", "-c", str(cfg), "--shard", "2/2")
    assert result.returncode == 2 and "--shard" in result.stderr


def test_collect_starts_without_a_config_file_on_the_defaults(tmp_path: Path) -> None:
    port = free_port()
    args = [*lanewatch_command(), "collect", "--port", str(port)]
    log_path = tmp_path / "collect.log"
    with started(args, log_path, env={"LANEWATCH__GPU__ENABLED": "false"}) as proc:

        def healthy() -> bool:
            assert proc.poll() is None, log_path.read_text()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
            except httpx.TransportError:
                return False

        eventually(healthy, 30, "the collector's /healthz on the defaults", every_s=0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
        # The receivers are on: an empty OTLP/JSON span batch is taken.
        r = httpx.post(f"http://127.0.0.1:{port}/v1/traces", json={"resourceSpans": []})
        assert r.status_code == 200, r.text
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    assert "0 targets" in log_path.read_text()


def test_collect_serves_metrics_writes_joined_records_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    with start_simulator(tmp_path, otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces") as sim:
        cfg = tmp_path / "collect.yaml"
        cfg.write_text(yaml.safe_dump({
            "targets": [{"name": "sim", "url": sim.url, "lane": "fast", "model": sim.model}],
            "probe": {"interval_s": 0.1, "classes": [{"name": "short", "prompt_words": 8, "max_tokens": 4}]},
            "scrape": {"interval_s": 0.2},
            "gpu": {"enabled": False},
        }))  # fmt: skip
        records = tmp_path / "out" / "records.jsonl"
        log_path = tmp_path / "collect.log"
        args = [
            *lanewatch_command(),
            "collect",
            "-c",
            str(cfg),
            "--port",
            str(port),
            "--records",
            str(records),
        ]
        with started(args, log_path) as proc:

            def joined_records() -> int:
                assert proc.poll() is None, log_path.read_text()
                if not records.exists():
                    return 0
                lines = records.read_text().splitlines()
                n = sum(json.loads(line)["queue_s"] is not None for line in lines if line.endswith("}"))
                return n if n >= 5 else 0

            joined = eventually(joined_records, 30, "five records joined to their server phases", every_s=0.2)
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
            assert 'lanewatch_scrape_up{lane="fast",target="sim"} 1.0' in metrics
            assert 'lanewatch_ttft_seconds_count{lane="fast",model=' in metrics
            assert httpx.get(f"http://127.0.0.1:{port}/healthz").json()["status"] == "ok"
            os.killpg(proc.pid, signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
    read = read_records(records)  # every line is a whole, valid record
    assert len(read.records) >= joined and not read.bad_lines
    assert "HTTP Request:" not in (tmp_path / "collect.log").read_text()  # no line per probe or scrape
