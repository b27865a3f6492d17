"""`lanewatch collect` scraping a real vLLM: every series it derives from the scrape gets data."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.collect.scrape import PHASE_HISTOGRAMS
from lanewatch.exporters import names
from tests.servers import free_port, lanewatch_command, stop_process, wait_http
from tests.waiting import eventually

from .engine import VllmHandle
from .relay import SpanRelay
from .traffic import exercise

pytestmark = pytest.mark.vllm

# What the collector exports from the scrape; the spec-decode ratio needs a draft model, which the
# contract server does not run (an empty series there is right, and is checked to stay empty).
DERIVED = (
    names.SCRAPE_UP,
    names.SCRAPE_ERRORS_TOTAL,
    names.SCRAPE_DURATION_SECONDS,
    names.SERVER_REQUESTS_RUNNING,
    names.SERVER_REQUESTS_WAITING,
    names.SERVER_KV_CACHE_USAGE_RATIO,
    names.SERVER_PREFIX_CACHE_HIT_RATIO,
    names.SERVER_PREEMPTIONS_TOTAL,
)


def _records(path: Path) -> list[dict[str, Any]]:
    """The records the collector has written so far."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def series(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples of the collector's page by sample name."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def gaps(text: str) -> list[str]:
    """Derived series without a sample for the target, or phases without quantiles."""
    got = series(text)
    missing = [n for n in DERIVED if not any(lab.get("target") == "real" for lab, _ in got.get(n, []))]
    phases = {lab.get("phase") for lab, _ in got.get(names.SERVER_PHASE_QUANTILE_SECONDS, [])}
    missing += [f"phase {p}" for p in PHASE_HISTOGRAMS if p not in phases]
    return missing


def test_collect_derives_every_scrape_series_from_a_real_vllm(
    vllm_server: VllmHandle, span_relay: SpanRelay, tmp_path: Path
) -> None:
    port = free_port()
    cfg = tmp_path / "collect.yaml"
    cfg.write_text(yaml.safe_dump({
        "targets": [{"name": "real", "url": vllm_server.url, "lane": "fast", "model": vllm_server.model}],
        "probe": {"interval_s": 0.5, "classes": [{"name": "short", "prompt_words": 8, "max_tokens": 6}]},
        "scrape": {"interval_s": 0.5},
        "gpu": {"enabled": False},
    }))  # fmt: skip
    records = tmp_path / "records.jsonl"
    log_path = tmp_path / "collect.log"
    args = [*lanewatch_command(), "collect", "-c", str(cfg), "--port", str(port), "--records", str(records)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", proc, log_path.read_text)
        with (
            span_relay.forwarding_to(f"{url}/v1/traces"),
            httpx.Client(base_url=vllm_server.url, timeout=120) as c,
        ):
            deadline = time.monotonic() + 120
            missing = ["not scraped yet"]
            while missing and time.monotonic() < deadline:
                exercise(c, vllm_server.model)
                time.sleep(1.0)
                page = httpx.get(f"{url}/metrics").text
                missing = gaps(page)
            assert missing == [], (missing, log_path.read_text()[-3000:])
            # vLLM batches its spans (a few seconds) and the collector writes a record once its join
            # wait is over, so the joined records come a while after the scrape has data.
            joined = eventually(
                lambda: [r for r in _records(records) if r.get("phases_source") == "span"],
                90,
                "a probe record joined a real span",
                every_s=1.0,
                context=lambda: log_path.read_text()[-3000:],
            )
        got = series(page)
        assert [v for lab, v in got[names.SCRAPE_UP] if lab["target"] == "real"] == [1.0]
        assert not any(
            lab.get("target") == "real" for lab, _ in got.get(names.SERVER_SPEC_DECODE_ACCEPTANCE_RATIO, [])
        )
        assert all(r["queue_s"] >= 0 for r in joined)
    finally:
        stop_process(proc)
