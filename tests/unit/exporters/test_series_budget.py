"""The series budget holds against 10,000 distinct (model, class) combinations, in-process:
/metrics stays under 2 MB and a scrape renders in well under 50 ms, for the gateway's wiring
and the collector's. (tests/integration/reliability/test_series_budget.py runs the processes.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.collect.settings import ExportConfig
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.record.timing import ErrorKind, RequestTiming
from lanewatch.exporters import names
from lanewatch.exporters.request_metrics import RequestMetrics
from lanewatch.exporters.series_budget import SeriesBudget, fold

COMBOS = 10_000
MAX_PAGE = 2 * 1024 * 1024
MAX_RENDER_S = 0.050


def combo(i: int, ok: bool = True) -> RequestTiming:
    return RequestTiming(
        source="tap", target="127.0.0.1:8001", lane="fast", request_class=f"c{i % 150}",
        model=f"model-{i}", started_at=1.7e9, status=200 if ok else 404, ttfb_s=0.01,
        ttft_s=0.02 if ok else None, e2e_s=0.3, itl_s=(0.01,) * 10 if ok else (),
        output_tokens=11 if ok else None,
    )  # fmt: skip


def best_of(render: Callable[[], bytes], n: int = 3) -> tuple[float, bytes]:
    times, page = [], b""
    for _ in range(n):
        t0 = time.perf_counter()
        page = render()
        times.append(time.perf_counter() - t0)
    return min(times), page


def folded(page: bytes) -> float:
    for family in text_string_to_metric_families(page.decode()):
        if family.name + "_total" == names.SERIES_OVERFLOW_TOTAL:
            return sum(s.value for s in family.samples)
    raise AssertionError("no overflow counter")


def test_the_budget_counts_series_and_folds_past_either_bound() -> None:
    budget = SeriesBudget(max_series=100, max_per_family=60)
    assert budget.admit("a", 37) and not budget.admit("a", 37)  # the family's bound
    assert budget.admit("b", 37) and not budget.admit("c", 37)  # the exporter's bound
    assert budget.total == 74 and budget.families == {"a": 37, "b": 37}
    over = names.OVERFLOW_VALUE
    assert fold(("t", "l", "c", "m", "tap", "queue")) == (over, "l", over, over, "tap", "queue")


def test_a_lane_never_folds_and_keeps_its_reserve() -> None:
    budget = SeriesBudget(max_series=1000, max_per_family=400, lanes=("fast", "slow"))
    assert budget.reserve_per_family == 100 and budget.reserve_series == 250
    squatted = sum(budget.admit("a", 10, "slow") for _ in range(100))
    assert squatted == 30  # slow's reserve (10 sets) and the shared part (20 sets), then no more
    assert sum(budget.admit("a", 10, "fast") for _ in range(100)) == 10  # fast's reserve is whole
    assert not budget.admit("a", 10, "other")  # an unknown lane has the shared part alone
    assert budget.families["a"] <= budget.max_per_family


def test_client_chosen_classes_fold_into_their_lane_and_its_failures_still_count() -> None:
    """10,000 class names on the slow lane: its later failures still count under lane="slow",
    and the fast lane still gets series of its own."""
    m = RequestMetrics(
        None, max_label_values=20_000, lanes=("fast", "slow")
    )  # classes open: the budget alone
    for i in range(COMBOS):
        m.observe(replace(combo(i), lane="slow", model="m"))
    for _ in range(5):
        m.observe(replace(combo(0, ok=False), lane="slow", request_class="late", status=503,
                          error=ErrorKind.HTTP_5XX))  # fmt: skip
    m.observe(replace(combo(1), lane="fast", request_class="fresh", model="m"))
    families = {f.name: f for f in text_string_to_metric_families(m.exposition())}
    errors = [s for s in families[names.REQUEST_ERRORS_TOTAL.removesuffix("_total")].samples]
    slow_5xx = sum(
        s.value for s in errors if s.labels["lane"] == "slow" and s.labels["error_kind"] == "http_5xx"
    )
    assert slow_5xx == 5
    lanes = {s.labels["lane"] for f in families.values() for s in f.samples if "lane" in s.labels}
    assert names.OVERFLOW_VALUE not in lanes
    fast = [
        s for s in families[names.REQUESTS_TOTAL.removesuffix("_total")].samples if s.labels["lane"] == "fast"
    ]
    assert [s.labels["request_class"] for s in fast] == ["fresh"]


def test_lanes_and_classes_outside_their_sets_count_as_other() -> None:
    m = RequestMetrics(None, lanes=("fast",), classes=("interactive", "batch"))
    m.observe(replace(combo(0), lane="made-up", request_class="sq0"))
    m.observe(replace(combo(1), lane="fast", request_class="batch"))
    page = m.exposition()
    assert 'lane="other",model="model-0",request_class="other"' in page
    assert 'lane="fast",model="model-1",request_class="batch"' in page
    assert "made-up" not in page and "sq0" not in page


def test_gateway_metrics_stay_in_budget(tmp_path: Path) -> None:
    from lanewatch.collector.gateway.processes.serve import build_gateway

    cfg = GatewayConfig.model_validate({"lanes": {"fast": {"upstreams": ["http://127.0.0.1:9"]}}})
    gw = build_gateway(cfg, ExportConfig(), None).gateway
    assert gw.metrics_text is not None
    for i in range(COMBOS):
        gw.emit(combo(i, ok=i % 20 == 0))
    first = time.perf_counter()
    gw.metrics_text()
    first_s = time.perf_counter() - first
    for i in range(0, COMBOS, 10):  # a scrape interval's traffic, on series old and new
        gw.emit(combo(i + COMBOS, ok=True))
    render_s, page = best_of(lambda: gw.metrics_text()[0])  # type: ignore[misc]
    assert len(page) < MAX_PAGE and folded(page) > 0
    assert render_s < MAX_RENDER_S, (render_s, first_s)


def test_collector_metrics_stay_in_budget(tmp_path: Path) -> None:
    cfg = LanewatchConfig.model_validate(
        {"targets": [], "gpu": {"enabled": False}, "otlp": {"enabled": False}, "scrape": {"enabled": False}}
    )
    svc = CollectorService.from_config(cfg, source_factory=None)
    svc.receive_records(combo(i) for i in range(COMBOS))
    svc.render_metrics()
    svc.receive_records(combo(i) for i in range(COMBOS, COMBOS + 1000))

    async def scrapes() -> tuple[float, bytes]:
        await svc.window_text()  # the summary one scrape makes, on a thread; the next second's share it
        times, page = [], b""
        for _ in range(3):
            t0 = time.perf_counter()
            page = await svc.render_metrics_async()
            times.append(time.perf_counter() - t0)
        return min(times), page

    render_s, page = asyncio.run(scrapes())
    assert len(page) < MAX_PAGE and folded(page) > 0
    assert render_s < MAX_RENDER_S, render_s
