from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lanewatch.alerts.spec import SpecError
from lanewatch.collector.collect.scrape import ServerSnapshot, snapshot_from_text
from lanewatch.collector.collect.service import CollectorService, lane_order, shard_targets
from lanewatch.collector.common.secrets import SecretError
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.record.evidence import GpuSample, ServerSpan
from lanewatch.collector.record.files import RecordsWriter
from lanewatch.collector.record.goodput import Bound, Goodput
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.exporters import names

TRACE = "ab" * 16


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def config(tmp_path: Path | None = None, **overrides: Any) -> LanewatchConfig:
    data: dict[str, Any] = {
        "targets": [
            {"name": "a", "url": "http://127.0.0.1:1", "lane": "fast", "model": "m"},
            {"name": "b", "url": "http://127.0.0.1:2", "lane": "slow", "model": "m", "scrape": False},
        ],
        "gpu": {"enabled": False},
        "otlp": {"join_wait_s": 2.0},
    }
    if tmp_path is not None:
        data["export"] = {"records_path": str(tmp_path / "records.jsonl")}
    data.update(overrides)
    return LanewatchConfig(**data)


def record(trace: str | None = TRACE) -> RequestTiming:
    return RequestTiming(
        source="probe", target="a", lane="fast", request_class="short", model="m", status=200,
        trace_id=trace, ttft_s=0.1, e2e_s=0.5, output_tokens=16, prompt_tokens=10, send_s=0.001,
    )  # fmt: skip


def service(cfg: LanewatchConfig, clock: Clock) -> tuple[CollectorService, list[RequestTiming]]:
    """The service as `lanewatch collect` builds it from `cfg`, without probes; and what it emits."""
    svc = CollectorService.from_config(cfg, source_factory=None, clock=clock)
    seen: list[RequestTiming] = []
    svc.add_listener(seen.append)
    return svc, seen


def text(svc: CollectorService) -> str:
    """GET /metrics on the service's own app: the bytes a Prometheus scrape reads."""
    answer = TestClient(svc.app()).get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    return answer.text


def test_record_waits_for_its_span_then_flows_everywhere(tmp_path: Path) -> None:
    clock = Clock()
    svc, seen = service(config(tmp_path), clock)
    svc.submit(record())
    assert seen == []  # waiting for the span
    svc.receive_spans([ServerSpan(TRACE, queue_s=0.02, prefill_s=0.05, decode_s=0.4)])
    assert len(seen) == 1 and seen[0].queue_s == 0.02
    out = text(svc)
    assert 'lanewatch_phase_seconds_count{lane="fast",model="m",phase="queue"' in out
    assert f"{names.OTLP_SPANS_JOINED_TOTAL} 1.0" in out
    svc.shutdown()
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert [json.loads(line)["queue_s"] for line in lines] == [0.02]


def test_unjoined_record_is_released_after_the_wait() -> None:
    clock = Clock()
    svc, seen = service(config(), clock)
    svc.submit(record())
    clock.now += 1.9
    svc.expire()
    assert seen == []
    clock.now += 0.2
    svc.expire()
    assert len(seen) == 1 and not seen[0].has_server_phases
    assert f"{names.OTLP_UNJOINED_RECORDS_TOTAL} 1.0" in text(svc)


def test_without_receiver_records_pass_at_once() -> None:
    svc, seen = service(config(otlp={"enabled": False}), Clock())
    svc.submit(record())
    assert len(seen) == 1
    assert names.OTLP_SPANS_RECEIVED_TOTAL not in text(svc)


def test_close_releases_waiting_records_to_the_file(tmp_path: Path) -> None:
    svc, seen = service(config(tmp_path), Clock())
    svc.submit(record())
    svc.shutdown()
    assert len(seen) == 1
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == 1


def test_scrape_snapshots_reach_metrics_and_unscraped_targets_are_absent() -> None:
    clock = Clock()
    svc, _ = service(config(), clock)
    assert [t.target for t in svc.scrape_targets] == ["a"]
    svc.add_snapshot(ServerSnapshot("a", "fast", at=clock.now, duration_s=1.0, error="timeout"))
    out = text(svc)
    assert 'lanewatch_scrape_up{lane="fast",target="a"} 0.0' in out
    assert 'lanewatch_scrape_errors_total{lane="fast",target="a"} 1.0' in out
    assert 'target="b"' not in out


def test_an_older_vllm_page_reports_its_missing_family_in_metrics_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    svc, _ = service(config(), clock)
    page = (Path(__file__).parents[3] / "fixtures" / "vllm-0.8-from-source" / "metrics.txt").read_text()
    with caplog.at_level(logging.WARNING, logger="lanewatch.collector.collect.service"):
        for _ in range(2):
            svc.add_snapshot(snapshot_from_text("a", "fast", page, clock.now, 0.01))
    out = text(svc)
    tpot = names.VLLM_REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS
    assert f'{names.SCRAPE_MISSING_FAMILIES}{{family="{tpot}",lane="fast",target="a"}} 1.0' in out
    assert out.count(names.SCRAPE_MISSING_FAMILIES + "{") == 1
    assert (
        'lanewatch_server_kv_cache_usage_ratio{lane="fast",target="a"} 0.125' in out
    )  # read by its old name
    missing = [r for r in caplog.records if tpot in r.getMessage()]
    assert len(missing) == 1  # two scrapes, one line


def test_shards_split_targets_between_collectors() -> None:
    targets = [{"name": f"t{i}", "url": "http://127.0.0.1:1", "model": "m"} for i in range(20)]
    owned = [
        {t.name for t in shard_targets(LanewatchConfig(targets=targets, probe={"shard": f"{i}/3"}))}
        for i in range(3)
    ]
    assert set.union(*owned) == {f"t{i}" for i in range(20)}
    assert sum(len(o) for o in owned) == 20 and all(owned)


def test_lane_order_from_gateway_or_targets() -> None:
    assert lane_order(config()) == ["fast", "slow"]
    cfg = config(gateway={"lanes": {"x": {"upstreams": ["http://h"]}, "y": {"upstreams": ["http://h"]}},
                          "lane_order": ["y", "x"]})  # fmt: skip
    assert lane_order(cfg) == ["y", "x"]


def test_content_reaches_the_file_and_listeners_but_not_the_window_or_metrics(tmp_path: Path) -> None:
    clock = Clock()
    svc, seen = service(config(tmp_path, otlp={"enabled": False}), clock)
    svc.submit(dataclasses.replace(record(), prompt_text="PROMPT-CANARY", response_text="RESPONSE-CANARY"))
    assert seen[0].prompt_text == "PROMPT-CANARY" and seen[0].response_text == "RESPONSE-CANARY"
    assert [r.prompt_text for r in svc.window.records(clock())] == [None]
    assert [r.response_text for r in svc.window.records(clock())] == [None]
    assert "CANARY" not in text(svc)
    svc.shutdown()
    line = json.loads((tmp_path / "records.jsonl").read_text())
    assert (line["prompt_text"], line["response_text"]) == ("PROMPT-CANARY", "RESPONSE-CANARY")


def test_scrapes_share_one_window_summary_until_it_is_a_second_old(monkeypatch: pytest.MonkeyPatch) -> None:
    from lanewatch.collector.collect import service as service_module

    summaries: list[float] = []
    summarise = service_module.window_exposition

    def counted(window: Any, now: float, lanes: list[str]) -> bytes:
        summaries.append(now)
        return summarise(window, now, lanes)

    monkeypatch.setattr(service_module, "window_exposition", counted)
    svc, _ = service(config(otlp={"enabled": False}), Clock())
    svc.submit(record(trace=None))

    async def scrapes() -> list[bytes]:
        pages = await asyncio.gather(*(svc.window_text() for _ in range(5)))
        svc.submit(dataclasses.replace(record(trace=None), request_class="story"))
        pages.append(await svc.window_text())  # within the second: the same summary
        svc._window_fresh_until = 0.0  # a second later
        pages.append(await svc.window_text())
        return pages

    pages = asyncio.run(scrapes())
    assert len(summaries) == 2
    assert len(set(pages[:6])) == 1 and b'request_class="short"' in pages[0]
    assert b'request_class="story"' not in pages[0] and b'request_class="story"' in pages[6]


def test_the_constructor_reads_nothing_and_from_config_names_what_it_cannot_load(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    cfg = config(ingest={"token_file": str(missing / "token")}, export={"slo_spec": str(missing / "s.yaml")})
    svc = CollectorService(cfg, source_factory=None)  # built parts only: no file is opened
    assert names.GOODPUT_REQUESTS_TOTAL not in text(svc)
    with pytest.raises(SpecError, match=r"s\.yaml"):
        CollectorService.from_config(cfg, source_factory=None)
    spec_ok = config(ingest={"token_file": str(missing / "token")})
    with pytest.raises(SecretError, match=r"ingest\.token_file"):
        CollectorService.from_config(spec_ok, source_factory=None)


def test_built_parts_given_to_the_constructor_are_the_ones_it_serves_with(tmp_path: Path) -> None:
    judge = Goodput(bounds={"fast": (Bound("ttft", 1.0),)})
    writer = RecordsWriter(tmp_path / "mine.jsonl")
    svc = CollectorService(
        config(otlp={"enabled": False}),
        goodput=judge,
        ingest_token="s3cret",
        writer=writer,
        source_factory=None,
    )
    svc.submit(record(trace=None))
    assert f'{names.GOODPUT_REQUESTS_TOTAL}{{lane="fast",model="m",outcome="met"' in text(svc)
    client = TestClient(svc.app())
    assert (
        client.post("/v1/records", content=b"{}", headers={"content-type": "application/json"}).status_code
        == 401
    )
    svc.shutdown()
    assert len((tmp_path / "mine.jsonl").read_text().splitlines()) == 1


def test_every_family_is_served_once_on_the_scraped_page() -> None:
    clock = Clock()
    svc, _ = service(config(), clock)
    svc.submit(record(trace=None))
    svc.add_snapshot(ServerSnapshot("a", "fast", at=clock.now, duration_s=1.0, error="timeout"))
    svc.gpu_samples = [GpuSample(0, "GPU-0", "H100", utilization_ratio=0.5)]
    svc.schedule_metrics.started(0.01)
    page = text(svc)
    helps = [line.split()[2] for line in page.splitlines() if line.startswith("# HELP ")]
    assert len(helps) == len(set(helps)), sorted(h for h in helps if helps.count(h) > 1)
    for family in (
        names.REQUESTS_TOTAL,
        names.WINDOW_QUANTILE_SECONDS,
        names.SCRAPE_UP,
        names.OTLP_SPANS_RECEIVED_TOTAL,
        names.GPU_UTILIZATION_RATIO,
        names.PROBE_START_DELAY_SECONDS,
    ):
        assert family in helps, family
