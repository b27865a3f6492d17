from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from lanewatch.collector.collect.scrape import (
    Buckets,
    ServerSnapshot,
    ServerWindow,
    bucket_index,
    bucket_quantile,
    buckets_delta,
    parse_metrics,
    snapshot_from_text,
)
from lanewatch.exporters import names

# vLLM's own histogram buckets
PHASE_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960,
                 1920, 7680)  # fmt: skip
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10,
                20, 40, 80, 160, 640, 2560)  # fmt: skip


def vllm_page(
    queue: Sequence[float] = (),
    ttft: Sequence[float] = (),
    engines: int = 1,
    running: float = 3,
    waiting: float = 1,
    kv: Sequence[float] = (0.25,),
    prefix: tuple[float, float] = (0, 0),
    preemptions: float = 0,
    legacy: bool = False,
) -> str:
    """A /metrics page as vLLM renders it (prometheus_client, `model_name` and `engine` labels)."""
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    q = Histogram(names.VLLM_REQUEST_QUEUE_TIME_SECONDS, "q", labels, registry=reg, buckets=PHASE_BUCKETS)
    ttft_name = "vllm:time_per_output_token_seconds" if legacy else names.VLLM_TIME_TO_FIRST_TOKEN_SECONDS
    t = Histogram(ttft_name, "t", labels, registry=reg, buckets=TTFT_BUCKETS)
    g_run = Gauge(names.VLLM_NUM_REQUESTS_RUNNING, "r", labels, registry=reg)
    g_wait = Gauge(names.VLLM_NUM_REQUESTS_WAITING, "w", labels, registry=reg)
    kv_name = "vllm:gpu_cache_usage_perc" if legacy else names.VLLM_KV_CACHE_USAGE_PERC
    g_kv = Gauge(kv_name, "kv", labels, registry=reg)
    pfx = "vllm:gpu_prefix_cache" if legacy else "vllm:prefix_cache"
    c_q = Counter(f"{pfx}_queries", "pq", labels, registry=reg)
    c_h = Counter(f"{pfx}_hits", "ph", labels, registry=reg)
    c_p = Counter("vllm:num_preemptions", "p", labels, registry=reg)
    for e in range(engines):
        lv = ("m", str(e))
        for i, v in enumerate(queue):
            if i % engines == e:
                q.labels(*lv).observe(v)
        for i, v in enumerate(ttft):
            if i % engines == e:
                t.labels(*lv).observe(v)
        g_run.labels(*lv).set(running)
        g_wait.labels(*lv).set(waiting)
        g_kv.labels(*lv).set(kv[e % len(kv)])
        c_q.labels(*lv).inc(prefix[1] / engines)
        c_h.labels(*lv).inc(prefix[0] / engines)
        c_p.labels(*lv).inc(preemptions / engines)
    return generate_latest(reg).decode()


def test_bucket_quantile_prometheus_semantics() -> None:
    h = Buckets((0.1, 0.5, 1.0, math.inf), (10, 30, 40, 40), 0)
    assert bucket_quantile(0.5, h) == pytest.approx(0.1 + 0.4 * 10 / 20)
    assert bucket_quantile(0.1, h) == pytest.approx(0.04)  # rank 4 of the 10 in [0, 0.1]
    h_inf = Buckets((0.1, 0.5, math.inf), (1, 2, 10), 0)
    assert bucket_quantile(0.99, h_inf) == 0.5  # in +Inf: the highest finite bound
    assert bucket_quantile(0.5, Buckets((0.1, math.inf), (0, 0), 0)) is None


def test_bucket_quantile_rank_at_bucket_boundary() -> None:
    h = Buckets((1.0, 2.0, math.inf), (5, 10, 10), 0)
    assert bucket_quantile(0.5, h) == pytest.approx(1.0)  # rank 5 ends the first bucket


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=0.0005, max_value=30.0), min_size=20, max_size=300),
    st.sampled_from([0.5, 0.9, 0.95, 0.99]),
)
def test_scraped_quantile_within_one_bucket_of_true(values: list[float], q: float) -> None:
    _, _, hists = parse_metrics(vllm_page(ttft=values))
    h = hists[names.VLLM_TIME_TO_FIRST_TOKEN_SECONDS]
    assert h.count == len(values)
    est = bucket_quantile(q, h)
    assert est is not None
    true = rank_value(sorted(values), q)
    assert abs(bucket_index(h.bounds, est) - bucket_index(h.bounds, true)) <= 1


def rank_value(sorted_values: Sequence[float], q: float) -> float:
    """The observation of rank ⌈q·n⌉: what a histogram locates (its bucket holds it).

    An interpolated quantile (window.quantile) can fall between two observations in a bucket
    that holds neither, e.g. halfway between ten 0.5 s and ten 2 s values.
    """
    return sorted_values[max(math.ceil(q * len(sorted_values)) - 1, 0)]


def test_parse_sums_engines_and_keeps_worst_kv() -> None:
    gauges, counters, hists = parse_metrics(
        vllm_page(
            queue=[0.1, 0.4, 0.9, 2.0], engines=2, running=3, waiting=2, kv=(0.2, 0.7), prefix=(30, 100)
        )
    )
    assert gauges[names.VLLM_NUM_REQUESTS_RUNNING] == 6
    assert gauges[names.VLLM_NUM_REQUESTS_WAITING] == 4
    assert gauges[names.VLLM_KV_CACHE_USAGE_PERC] == 0.7
    assert counters[names.VLLM_PREFIX_CACHE_HITS_TOTAL] == 30
    h = hists[names.VLLM_REQUEST_QUEUE_TIME_SECONDS]
    assert h.count == 4 and h.sum == pytest.approx(3.4)
    assert h.cumulative[:4] == (1, 2, 2, 3)  # ≤0.3, ≤0.5, ≤0.8, ≤1.0


def test_parse_accepts_v0_names() -> None:
    gauges, counters, hists = parse_metrics(vllm_page(ttft=[0.02], kv=(0.5,), prefix=(1, 4), legacy=True))
    assert gauges[names.VLLM_KV_CACHE_USAGE_PERC] == 0.5
    assert counters[names.VLLM_PREFIX_CACHE_QUERIES_TOTAL] == 4
    assert hists[names.VLLM_INTER_TOKEN_LATENCY_SECONDS].count == 1  # time_per_output_token → ITL


def test_v1_name_wins_over_its_v0_alias() -> None:
    page = "vllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.1\n"
    gauges, _, _ = parse_metrics(page)
    assert gauges[names.VLLM_KV_CACHE_USAGE_PERC] == 0.1


def test_histogram_label_sets_with_different_bounds_combine() -> None:
    page = (
        '# TYPE vllm:request_queue_time_seconds histogram\n'
        'vllm:request_queue_time_seconds_bucket{engine="0",le="1.0"} 2\n'
        'vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf"} 3\n'
        'vllm:request_queue_time_seconds_bucket{engine="1",le="0.5"} 1\n'
        'vllm:request_queue_time_seconds_bucket{engine="1",le="+Inf"} 1\n'
    )  # fmt: skip
    h = parse_metrics(page)[2][names.VLLM_REQUEST_QUEUE_TIME_SECONDS]
    assert h.bounds == (0.5, 1.0, math.inf)
    assert h.cumulative == (1, 3, 4)


@pytest.mark.parametrize(
    "page",
    [
        "<html>502 Bad Gateway</html>",
        'vllm:num_requests_running{a="b" 1\n',
        "vllm:num_requests_running not_a_number\n",
        "",
        "# a page of other metrics\nprocess_cpu_seconds_total 1.5\n",
    ],
)
def test_unparsable_page_is_a_failed_snapshot(page: str) -> None:
    snap = snapshot_from_text("t", "fast", page, at=1.0, duration_s=0.01)
    assert not snap.up
    assert snap.error is not None and snap.error.startswith("parse")


def test_delta_handles_counter_reset() -> None:
    old = Buckets((1.0, math.inf), (5, 8), 4.0)
    new = Buckets((1.0, math.inf), (7, 11), 6.0)
    assert buckets_delta(new, old) == Buckets((1.0, math.inf), (2, 3), 2.0)
    restarted = Buckets((1.0, math.inf), (1, 1), 0.2)
    assert buckets_delta(restarted, old) == restarted
    assert buckets_delta(new, None) == new


def _snap(at: float, page: str) -> ServerSnapshot:
    return snapshot_from_text("t", "fast", page, at=at, duration_s=0.004)


def test_window_quantiles_come_from_deltas_only() -> None:
    w = ServerWindow("t", "fast", window_s=60)
    w.add(_snap(0, vllm_page(queue=[5.0] * 50)))  # before the collector started watching
    w.add(_snap(10, vllm_page(queue=[5.0] * 50 + [0.2] * 10)))
    stats = w.stats(now=10)
    assert stats.up and stats.scrape_errors == 0
    assert stats.phase_quantiles["queue"][0.99] <= 0.3  # the fifty 5 s waits are not in the window
    assert "prefill" not in stats.phase_quantiles
    assert (stats.requests_running, stats.requests_waiting, stats.kv_cache_usage) == (3, 1, 0.25)


def test_window_forgets_old_deltas_and_survives_restart() -> None:
    w = ServerWindow("t", "fast", window_s=30)
    w.add(_snap(0, vllm_page(queue=[])))
    w.add(_snap(10, vllm_page(queue=[2.2] * 10, preemptions=2)))
    w.add(_snap(50, vllm_page(queue=[0.1] * 3, preemptions=1)))  # server restarted: counters reset
    stats = w.stats(now=50)
    assert stats.phase_quantiles["queue"][0.99] <= 0.3
    assert stats.preemptions == 3
    assert w.stats(now=200).phase_quantiles == {}


def test_down_target_counts_errors_and_drops_gauges() -> None:
    w = ServerWindow("t", "fast", window_s=60)
    w.add(_snap(0, vllm_page(prefix=(0, 0))))
    w.add(_snap(5, vllm_page(prefix=(30, 40))))
    assert w.stats(5).prefix_cache_hit_ratio == pytest.approx(0.75)
    w.add(ServerSnapshot("t", "fast", at=10, duration_s=3.0, error="timeout"))
    w.add(ServerSnapshot("t", "fast", at=15, duration_s=0.001, error="connect: ConnectError"))
    stats = w.stats(15)
    assert not stats.up and stats.scrape_errors == 2
    assert stats.requests_running is None and stats.kv_cache_usage is None
    w.add(_snap(20, vllm_page(prefix=(30, 40))))
    assert w.stats(20).up


def test_spec_decode_acceptance_from_counters_or_v0_gauge() -> None:
    def page(accepted: float, drafted: float) -> str:
        return (
            f"vllm:spec_decode_num_accepted_tokens_total {accepted}\n"
            f"vllm:spec_decode_num_draft_tokens_total {drafted}\n"
        )

    w = ServerWindow("t", "fast")
    w.add(_snap(0, page(0, 0)))
    w.add(_snap(5, page(60, 100)))
    assert w.stats(5).spec_decode_acceptance_ratio == pytest.approx(0.6)
    v0 = ServerWindow("t", "fast")
    v0.add(_snap(0, "vllm:spec_decode_draft_acceptance_rate 0.4\n"))
    assert v0.stats(0).spec_decode_acceptance_ratio == 0.4
