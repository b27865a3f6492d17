"""vLLM metrics on an injected registry: counts follow the engine and requests."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.simulator.engine import Engine, EngineRequest
from lanewatch.simulator.metrics import EngineState, FinishedRequest, VllmMetrics, build_1_2_5_buckets
from lanewatch.simulator.profiles import FAST


def values(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_1_2_5_buckets() -> None:
    assert build_1_2_5_buckets(100) == [1, 2, 5, 10, 20, 50, 100]
    assert build_1_2_5_buckets(32768)[-1] == 20000


def test_steps_and_finishes_are_counted() -> None:
    reg = CollectorRegistry()
    engine = Engine(FAST.engine_config())
    state = EngineState(lambda: engine.num_running, lambda: engine.num_waiting, lambda: engine.kv.usage)
    m = VllmMetrics(reg, "m", 1000, state, {"block_size": "16"})
    engine.add(EngineRequest("a", list(range(40)), 3, 0.0))
    base = (("engine", "0"), ("model_name", "m"))
    step = engine.step(0.0)
    assert step is not None
    m.on_step(step)
    v = values(reg)
    assert v[("vllm:num_requests_running", base)] == 1
    assert v[("vllm:kv_cache_usage_perc", base)] > 0
    assert v[("vllm:prompt_tokens_total", base)] == 40
    assert v[("vllm:generation_tokens_total", base)] == 1
    assert v[("vllm:prefix_cache_queries_total", base)] == 40
    m.on_finish(FinishedRequest("length", 0.01, 0.05, 0.001, 0.002, 0.04, 40, 3, 3, 0), cached_tokens=0)
    v = values(reg)
    assert v[("vllm:request_success_total", (*base[:1], ("finished_reason", "length"), base[1]))] == 1
    assert v[("vllm:time_to_first_token_seconds_count", base)] == 1
    assert v[("vllm:request_time_per_output_token_seconds_sum", base)] == 0.02
    assert v[("vllm:e2e_request_latency_seconds_sum", base)] == 0.05
