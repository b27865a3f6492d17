"""Three `lanewatch collect --shard i/3` share a fleet: each target is probed by one, and
together they export the per-target series one unsharded collector exports."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.probe.suites import shard_of
from lanewatch.collector.record.files import read_records
from tests.servers import free_port, lanewatch_command, run_service, start_simulator

pytestmark = pytest.mark.integration

TARGETS = [f"t{i}" for i in range(9)]
SHARDS = 3
# The per-target families: what a shard owns. (Window and join series are per lane or global.)
PER_TARGET = (
    "lanewatch_requests_total",
    "lanewatch_ttft_seconds",
    "lanewatch_e2e_seconds",
    "lanewatch_scrape_up",
    "lanewatch_scrape_errors_total",
)

Series = tuple[str, tuple[tuple[str, str], ...]]


def _config(url: str, model: str) -> dict[str, Any]:
    return {
        "targets": [{"name": name, "url": url, "model": model, "lane": "fast"} for name in TARGETS],
        "probe": {"interval_s": 0.5, "classes": [{"name": "short", "prompt_words": 8, "max_tokens": 4}]},
        "scrape": {"interval_s": 0.5},
        "otlp": {"enabled": False},
        "gpu": {"enabled": False},
    }


def _series(text: str) -> set[Series]:
    """Every per-target sample's name and labels (values left out: they differ by timing)."""
    out = set()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith(PER_TARGET) and "target" in s.labels:
                out.add((s.name, tuple(sorted(s.labels.items()))))
    return out


def _targets(series: set[Series]) -> set[str]:
    return {dict(labels)["target"] for name, labels in series if name == "lanewatch_requests_total"}


def test_shards_split_the_targets_and_together_export_one_collectors_series(tmp_path: Path) -> None:
    owners = {name: shard_of(name, SHARDS) for name in TARGETS}
    assert set(owners.values()) == set(range(SHARDS))  # every shard owns some target
    with start_simulator(tmp_path) as sim, contextlib.ExitStack() as stack:
        cfg = tmp_path / "collect.yaml"
        cfg.write_text(yaml.safe_dump(_config(sim.url, sim.model)))
        runs = {}
        for shard in [*range(SHARDS), None]:
            port = free_port()
            name = "all" if shard is None else f"shard{shard}"
            args = [*lanewatch_command(), "collect", "-c", str(cfg), "--port", str(port)]
            args += ["--records", str(tmp_path / f"{name}.jsonl"), "--log-level", "warning"]
            if shard is not None:
                args += ["--shard", f"{shard}/{SHARDS}"]
            stack.enter_context(
                run_service(args, tmp_path / f"{name}.log", f"http://127.0.0.1:{port}/healthz")
            )
            runs[name] = port
        pages: dict[str, str] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until every collector has probed and scraped each of its targets
            pages = {
                name: httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
                for name, port in runs.items()
            }
            if len(_targets(_series(pages["all"]))) == len(TARGETS) and all(
                _targets(_series(pages[f"shard{i}"])) == {t for t, s in owners.items() if s == i}
                for i in range(SHARDS)
            ):
                break
            time.sleep(0.5)
        pages = {
            name: httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            for name, port in runs.items()
        }
    shard_series = [_series(pages[f"shard{i}"]) for i in range(SHARDS)]
    for i, series in enumerate(shard_series):
        assert _targets(series) == {t for t, s in owners.items() if s == i}
    for a in range(SHARDS):
        for b in range(a + 1, SHARDS):
            assert not shard_series[a] & shard_series[b]  # no series exported twice
    assert set().union(*shard_series) == _series(pages["all"])
    # Every target was probed by exactly one shard (its records), and by the unsharded one.
    probed_by: Counter[str] = Counter()
    for i in range(SHARDS):
        for target in {r.target for r in read_records(tmp_path / f"shard{i}.jsonl").records}:
            probed_by[target] += 1
    assert probed_by == Counter({t: 1 for t in TARGETS})
    assert {r.target for r in read_records(tmp_path / "all.jsonl").records} == set(TARGETS)
