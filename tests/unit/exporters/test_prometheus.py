from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.record.evidence import GpuSample, ServerStats
from lanewatch.collector.record.goodput import Bound, Goodput
from lanewatch.collector.record.join import JoinStats
from lanewatch.collector.record.timing import ErrorKind, RequestTiming
from lanewatch.collector.record.window import Window, quantile
from lanewatch.exporters import names
from lanewatch.exporters.prometheus import (
    GpuMetrics,
    JoinMetrics,
    LabelCap,
    RequestMetrics,
    ServerMetrics,
    WindowMetrics,
)

GOLDEN = Path(__file__).parent / "golden"


def assert_golden(name: str, text: str) -> None:
    """Compare with golden/<name>; UPDATE_GOLDEN=1 (`make golden`) rewrites it (then review the diff)."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text()


def rec(
    target: str = "vllm-a",
    lane: str = "fast",
    cls: str = "short",
    ttft: float = 0.05,
    e2e: float = 0.4,
    out: int = 4,
    error: ErrorKind | None = None,
    server: bool = False,
) -> RequestTiming:
    r = RequestTiming(
        source="probe", target=target, lane=lane, request_class=cls, model="m", status=200,
        dns_s=0.001, connect_s=0.002, tls_s=0.0, send_s=0.0005, ttfb_s=0.01, ttft_s=ttft, e2e_s=e2e,
        itl_s=(0.1, 0.12, 0.13), prompt_tokens=17, output_tokens=out, error=error,
    )  # fmt: skip
    return r.with_server_phases(0.004, 0.03, 0.35) if server else r


def render(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    want = set(labels.items())
    hits = [v for (n, ls), v in samples(text).items() if n == name and want <= ls]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


def test_request_metrics_exact_exposition() -> None:
    reg = CollectorRegistry()
    m = RequestMetrics(reg, max_label_values=10)
    m.observe(rec(server=True))
    m.observe(rec(cls="story", ttft=0.2, e2e=2.5, out=64))
    m.observe(rec(error=ErrorKind.HTTP_5XX, ttft=None, e2e=None, out=0))  # type: ignore[arg-type]
    assert_golden("request_metrics.prom", render(reg))


def test_buckets_are_inclusive_and_one_itl_sample_per_gap() -> None:
    reg = CollectorRegistry()
    RequestMetrics(reg).observe(rec(ttft=0.05))
    text = render(reg)
    ttft = names.TTFT_SECONDS + "_bucket"
    assert value(text, ttft, le="0.04") == 0 and value(text, ttft, le="0.05") == 1
    assert value(text, names.ITL_SECONDS + "_count") == 3
    assert value(text, names.ITL_SECONDS + "_sum") == pytest.approx(0.35)
    assert value(text, names.TPOT_SECONDS + "_sum") == pytest.approx((0.4 - 0.05) / 3)


def test_phase_parts_sum_to_e2e() -> None:
    reg = CollectorRegistry()
    RequestMetrics(reg).observe(rec(server=True))
    text = render(reg)
    parts = {
        dict(ls)["phase"]: v for (n, ls), v in samples(text).items() if n == names.PHASE_SECONDS + "_sum"
    }
    assert set(parts) == {"dns", "connect", "tls", "send", "queue", "prefill", "residual", "decode"}
    assert sum(parts.values()) == pytest.approx(0.4)
    assert parts["queue"] == pytest.approx(0.004) and parts["prefill"] == pytest.approx(0.03)


def test_errors_count_but_stay_out_of_latency() -> None:
    reg = CollectorRegistry()
    m = RequestMetrics(reg)
    m.observe(rec())
    m.observe(rec(error=ErrorKind.STALL))
    text = render(reg)
    assert value(text, names.REQUESTS_TOTAL) == 2
    assert value(text, names.REQUEST_ERRORS_TOTAL, error_kind="stall") == 1
    assert value(text, names.TTFT_SECONDS + "_count") == 1
    assert value(text, names.TOKENS_TOTAL, token_type="input") == 34
    assert value(text, names.TOKENS_TOTAL, token_type="output") == 8


def test_cardinality_cap_per_label() -> None:
    reg = CollectorRegistry()
    m = RequestMetrics(reg, max_label_values=2)
    for t in ("a", "b", "c", "d", "a"):
        m.observe(rec(target=t))
    text = render(reg)
    assert value(text, names.REQUESTS_TOTAL, target="a") == 2
    assert value(text, names.REQUESTS_TOTAL, target=names.OVERFLOW_VALUE) == 2
    targets = {dict(ls)["target"] for (n, ls) in samples(text) if n == names.REQUESTS_TOTAL}
    assert targets == {"a", "b", names.OVERFLOW_VALUE}
    assert m.cap(rec(target="zzz")).target == names.OVERFLOW_VALUE
    assert m.cap(rec(target="b")) == rec(target="b")


def test_label_cap_is_per_label() -> None:
    cap = LabelCap(1)
    assert cap.value("target", "x") == "x" and cap.value("lane", "y") == "y"
    assert cap.value("target", "z") == names.OVERFLOW_VALUE


def test_registry_is_injected_not_global() -> None:
    a, b = CollectorRegistry(), CollectorRegistry()
    RequestMetrics(a).observe(rec())
    RequestMetrics(b)
    assert value(render(a), names.REQUESTS_TOTAL) == 1
    assert names.REQUESTS_TOTAL + "{" not in render(b)
    with pytest.raises(ValueError, match="Duplicated"):
        RequestMetrics(a)


def test_window_metrics_exact_exposition() -> None:
    window = Window(window_s=60)
    for i in range(4):
        window.add(rec(lane="fast", cls="short", ttft=0.05 + i * 0.01, e2e=0.3 + i * 0.01, out=16), now=0)
        window.add(rec(lane="fast", cls="story", ttft=0.06, e2e=2.0 + i * 0.1, out=256), now=0)
        window.add(rec(lane="slow", cls="short", ttft=0.5, e2e=1.0, out=16 + i), now=0)
    reg = CollectorRegistry()
    WindowMetrics(reg, window, clock=lambda: 10.0, lane_order=lambda: ["fast", "slow"])
    text = render(reg)
    fast_ttft = sorted([0.05, 0.06, 0.07, 0.08] + [0.06] * 4)
    assert value(text, names.LANE_CONVERGENCE_RATIO, lane="fast") == pytest.approx(
        quantile(fast_ttft, 0.99) / 0.5
    )
    assert_golden("window_metrics.prom", text)
    assert "lanewatch_window_quantile_seconds{" not in render_at(window, 100.0)  # the window moved on


def render_at(window: Window, now: float) -> str:
    reg = CollectorRegistry()
    WindowMetrics(reg, window, clock=lambda: now)
    return render(reg)


def test_server_metrics_exact_exposition() -> None:
    up = ServerStats(
        target="vllm-a", lane="fast", up=True, scrape_errors=1, scrape_duration_s=0.0042,
        phase_quantiles={"queue": {0.5: 0.15, 0.99: 0.297}, "ttft": {0.5: 0.03}},
        requests_running=3, requests_waiting=0, kv_cache_usage=0.25, prefix_cache_hit_ratio=0.5,
        spec_decode_acceptance_ratio=None, preemptions=2,
        missing_families=("vllm:request_time_per_output_token_seconds",),
    )  # fmt: skip
    down = ServerStats(target="vllm-b", lane="slow", up=False, scrape_errors=7, scrape_duration_s=3.0,
                       phase_quantiles={})  # fmt: skip
    reg = CollectorRegistry()
    ServerMetrics(reg, lambda: [down, up])
    assert_golden("server_metrics.prom", render(reg))


def test_gpu_metrics() -> None:
    reg = CollectorRegistry()
    samples_now: list[GpuSample] = []
    GpuMetrics(reg, lambda: samples_now)
    assert render(reg) == ""  # no NVML: no GPU families at all
    sample = GpuSample(
        0, "GPU-1", "NVIDIA H200", utilization_ratio=0.9, memory_used_bytes=1e9, memory_total_bytes=2e9,
        power_watts=500.0, temperature_celsius=60, sm_clock_hertz=1.98e9, memory_clock_hertz=2.619e9,
        hbm_bandwidth_peak_bytes_per_second=4.02e12, dram_bandwidth_utilization_ratio=None,
    )  # fmt: skip
    samples_now.append(sample)
    assert_golden("gpu_metrics.prom", render(reg))


def test_join_metrics() -> None:
    reg = CollectorRegistry()
    stats = JoinStats(spans_received=10, spans_joined=9, orphan_spans=1, unjoined_records=2)
    JoinMetrics(reg, lambda: stats)
    text = render(reg)
    assert value(text, names.OTLP_SPANS_JOINED_TOTAL) == 9
    assert value(text, names.OTLP_UNJOINED_RECORDS_TOTAL) == 2


def test_metrics_page_documents_every_exported_metric() -> None:
    readme = (Path(__file__).parents[3] / "docs" / "metrics.md").read_text()
    reg = CollectorRegistry()
    RequestMetrics(reg).observe(rec(server=True))
    window = Window()
    window.add(rec(), 0)
    WindowMetrics(reg, window, clock=lambda: 0.0)
    ServerMetrics(reg, lambda: [])
    JoinMetrics(reg, JoinStats)
    gpu = GpuSample(0, "u", "n")
    GpuMetrics(reg, lambda: [gpu])
    families = {fam.name for fam in text_string_to_metric_families(render(reg))}
    assert len(families) > 30
    missing = sorted(f for f in families if f"`{f}`" not in readme and f"`{f}_total`" not in readme)
    assert not missing, f"docs/metrics.md does not document {missing}"


def test_exposition_writes_what_generate_latest_writes() -> None:
    reg = CollectorRegistry()
    m = RequestMetrics(reg, max_label_values=10, max_series=400, max_series_per_family=200)
    for i in range(30):  # past the budget: overflow series and counts are in both
        m.observe(rec(cls=f"c{i}", ttft=0.01 * i, e2e=0.5 + i))
    m.observe(rec(error=ErrorKind.HTTP_5XX, ttft=None, e2e=None, out=0))  # type: ignore[arg-type]
    m.observe(dataclasses.replace(rec(), model='we"ird\\name\nx'))
    text = render(reg)
    assert 'lanewatch_series_overflow_total{family="lanewatch_ttft_seconds"} 0.0' not in text
    assert m.exposition() == text
    assert m.exposition() == text  # the cached lines write the same again
    m.observe(rec(cls="c3", ttft=0.7, e2e=9.0))  # one series changed, and one new
    m.observe(rec(cls="late", ttft=0.7, e2e=9.0))
    assert m.exposition() == render(reg) != text


def test_goodput_counts_each_request_by_outcome_against_the_lane_it_was_routed_to() -> None:
    goodput = Goodput(
        bounds={"fast": (Bound("ttft", 0.5),), "slow": (Bound("ttft", 2.0), Bound("e2e", 30.0))},
        excluded_errors={"slow": frozenset({"client_disconnect"})},
    )
    registry = CollectorRegistry()
    metrics = RequestMetrics(registry, goodput=goodput)
    shifted = dataclasses.replace(rec(lane="fast", ttft=1.0), attrs={"routed_lane": "slow"})
    for r in (
        rec(lane="fast", ttft=0.4),
        rec(lane="fast", ttft=0.6),  # over the fast lane's 0.5 s
        shifted,  # served fast in 1 s, judged by the slow lane's 2 s: met, counted for slow
        rec(lane="slow", error=ErrorKind.HTTP_5XX),
        rec(lane="slow", error=ErrorKind.CLIENT_DISCONNECT),  # excluded: not counted
    ):
        metrics.observe(r)
    text = render(registry)
    assert metrics.exposition() == text  # the gateway's and collector's /metrics write it so
    name = names.GOODPUT_REQUESTS_TOTAL
    assert value(text, name, lane="fast", outcome="met") == 1
    assert value(text, name, lane="fast", outcome="missed") == 1
    assert value(text, name, lane="slow", outcome="met") == 1
    assert value(text, name, lane="slow", outcome="failed") == 1
    assert sum(v for (n, _), v in samples(text).items() if n == name) == 4
    # without a goodput judge there is no such family
    assert names.GOODPUT_REQUESTS_TOTAL not in render_plain()


def render_plain() -> str:
    registry = CollectorRegistry()
    RequestMetrics(registry).observe(rec())
    return render(registry)


def test_a_client_mistake_is_counted_under_its_own_error_kind() -> None:
    reg = CollectorRegistry()
    m = RequestMetrics(reg)
    for status in (400, 404, 413, 422, 401):
        m.observe(dataclasses.replace(rec(error=ErrorKind.HTTP_4XX, ttft=None, out=0), status=status))  # type: ignore[arg-type]
    text = render(reg)
    kinds = {
        s.labels["error_kind"]: s.value
        for f in text_string_to_metric_families(text)
        if f.name == "lanewatch_request_errors"
        for s in f.samples
        if s.name.endswith("_total")
    }
    assert kinds == {"http_400": 1, "http_404": 1, "http_413": 1, "http_422": 1, "http_4xx": 1}
