"""vLLM V1's Prometheus metrics, same names, types, labels and buckets (vllm/v1/metrics/loggers.py).

Every engine metric carries `model_name` and `engine` ("0"); `vllm:request_success` adds
`finished_reason`, `vllm:num_requests_waiting_by_reason` adds `reason`,
`vllm:prompt_tokens_by_source` adds `source`. Counters get `_total` from prometheus_client, as in
vLLM. Gauges are read from the engine at scrape time. Speculative decoding's four counters
(vllm/v1/spec_decode/metrics.py: `vllm:spec_decode_num_drafts`, `_num_draft_tokens`,
`_num_accepted_tokens`, and `_num_accepted_tokens_per_pos` with `position` "0" .. k-1) exist only
when it is on, as in vLLM. Never exposed, as the simulator has no LoRA: `vllm:lora_requests_info`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .engine import StepResult
from .specdecode import SpecStats

LABELS = ("model_name", "engine")
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
TOKEN_LATENCY_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PREEMPTION_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
N_BUCKETS = (1, 2, 5, 10, 20)


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """1, 2, 5, 10, 20, 50, ... up to `max_value` (vLLM's length buckets)."""
    out: list[int] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            value = m * 10**exponent
            if value > max_value:
                return out
            out.append(value)
        exponent += 1


@dataclass(frozen=True)
class FinishedRequest:
    """What vLLM records when a request finishes (seconds and counts)."""

    finished_reason: str
    ttft_s: float
    e2e_s: float
    queue_s: float
    prefill_s: float
    decode_s: float
    prompt_tokens: int
    output_tokens: int
    max_tokens: int
    preemptions: int


@dataclass(frozen=True)
class EngineState:
    """The gauges' sources, read at scrape time."""

    running: Callable[[], float]
    waiting: Callable[[], float]
    kv_usage: Callable[[], float]


class VllmMetrics:
    """vLLM's metrics on an injected registry, for one served model and engine 0."""

    def __init__(
        self,
        registry: CollectorRegistry,
        model_name: str,
        max_model_len: int,
        state: EngineState,
        cache_info: dict[str, str],
        num_speculative_tokens: int | None = None,
    ) -> None:
        self._values = (model_name, "0")
        self._gauges(registry, state, cache_info)
        self._counters(registry)
        self._histograms(registry, max_model_len)
        self._spec = (
            SpecDecodeMetrics(registry, self._values, num_speculative_tokens)
            if num_speculative_tokens
            else None
        )

    def _gauges(self, reg: CollectorRegistry, state: EngineState, cache_info: dict[str, str]) -> None:
        v = self._values
        Gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            LABELS,
            registry=reg,
        ).labels(*v).set_function(state.running)
        Gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", LABELS, registry=reg
        ).labels(*v).set_function(state.waiting)
        by_reason = Gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of requests waiting, by the reason they wait.",
            (*LABELS, "reason"),
            registry=reg,
        )
        by_reason.labels(*v, "capacity").set_function(state.waiting)
        by_reason.labels(*v, "deferred").set(0)
        Gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", LABELS, registry=reg
        ).labels(*v).set_function(state.kv_usage)
        Gauge(
            "vllm:engine_sleep_state", "Engine sleep state.", (*LABELS, "sleep_state"), registry=reg
        ).labels(*v, "awake").set(1)
        info = {**cache_info, "engine": "0"}
        Gauge(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", tuple(info), registry=reg
        ).labels(**info).set(1)

    def _counters(self, reg: CollectorRegistry) -> None:
        v = self._values

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, LABELS, registry=reg).labels(*v)

        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        self.prompt_tokens_cached = counter(
            "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local prefix cache hits)."
        )
        self.cache_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.cache_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        by_source = Counter(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            (*LABELS, "source"),
            registry=reg,
        )
        self.tokens_computed = by_source.labels(*v, "local_compute")
        self.tokens_cache_hit = by_source.labels(*v, "local_cache_hit")
        by_source.labels(*v, "external_kv_transfer")
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            (*LABELS, "finished_reason"),
            registry=reg,
        )
        self.success = {r: success.labels(*v, r) for r in FINISHED_REASONS}

    def _histograms(self, reg: CollectorRegistry, max_model_len: int) -> None:
        v = self._values
        lengths = build_1_2_5_buckets(max_model_len)

        def hist(name: str, doc: str, buckets: tuple[float, ...] | list[int]) -> Histogram:
            return Histogram(name, doc, LABELS, buckets=buckets, registry=reg).labels(*v)

        self.ttft = hist(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = hist(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            TOKEN_LATENCY_BUCKETS,
        )
        self.tpot = hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            TOKEN_LATENCY_BUCKETS,
        )
        self.e2e = hist(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.queue = hist(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.inference = hist(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.prefill = hist(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.decode = hist(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.prompt_len = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", lengths)
        self.gen_len = hist(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", lengths
        )
        self.max_gen = hist(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            lengths,
        )
        self.max_tokens = hist(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", lengths
        )
        self.n_param = hist("vllm:request_params_n", "Histogram of the n request parameter.", N_BUCKETS)
        self.iteration = hist(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            ITERATION_TOKEN_BUCKETS,
        )
        self.req_preemptions = hist(
            "vllm:request_num_preemptions",
            "Histogram of the number of preemptions per request.",
            PREEMPTION_BUCKETS,
        )

    def on_step(self, step: StepResult) -> None:
        """Count one engine step."""
        self.iteration.observe(step.scheduled_tokens)
        if step.generation_tokens:
            self.generation_tokens.inc(step.generation_tokens)
        if step.prompt_tokens:
            self.prompt_tokens.inc(step.prompt_tokens)
        if step.cache_queries:
            self.cache_queries.inc(step.cache_queries)
            self.cache_hits.inc(step.cache_hits)
        if step.preemptions:
            self.preemptions.inc(step.preemptions)
        if step.spec is not None and self._spec is not None:
            self._spec.observe(step.spec)

    def on_token_gap(self, gap_s: float) -> None:
        """One inter-token latency sample."""
        self.itl.observe(gap_s)

    def on_finish(self, r: FinishedRequest, cached_tokens: int) -> None:
        """Record a finished request."""
        self.success[r.finished_reason].inc()
        self.n_param.observe(1)
        self.max_tokens.observe(r.max_tokens)
        self.max_gen.observe(r.max_tokens)
        if r.output_tokens == 0:
            return  # rejected or aborted before its first token: no timings to record
        self.ttft.observe(r.ttft_s)
        self.e2e.observe(r.e2e_s)
        self.queue.observe(r.queue_s)
        self.prefill.observe(r.prefill_s)
        self.decode.observe(r.decode_s)
        self.inference.observe(r.prefill_s + r.decode_s)
        self.prompt_len.observe(r.prompt_tokens)
        self.gen_len.observe(r.output_tokens)
        self.req_preemptions.observe(r.preemptions)
        self.tokens_computed.inc(r.prompt_tokens - cached_tokens)
        self.tokens_cache_hit.inc(cached_tokens)
        self.prompt_tokens_cached.inc(cached_tokens)
        if r.output_tokens > 1:
            self.tpot.observe(r.decode_s / (r.output_tokens - 1))


class SpecDecodeMetrics:
    """vLLM's SpecDecodingProm: the spec-decode counters, same names, documentation and labels."""

    def __init__(self, reg: CollectorRegistry, values: tuple[str, str], num_spec_tokens: int) -> None:
        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, LABELS, registry=reg).labels(*values)

        self.drafts = counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
        self.draft_tokens = counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
        self.accepted = counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
        per_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            (*LABELS, "position"),
            registry=reg,
        )
        self.per_pos = [per_pos.labels(*values, str(pos)) for pos in range(num_spec_tokens)]

    def observe(self, stats: SpecStats) -> None:
        """Count one step's drafts."""
        self.drafts.inc(stats.num_drafts)
        self.draft_tokens.inc(stats.num_draft_tokens)
        self.accepted.inc(stats.num_accepted_tokens)
        for counter, n in zip(self.per_pos, stats.accepted_per_pos, strict=True):
            counter.inc(n)
