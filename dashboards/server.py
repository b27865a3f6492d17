"""Server and GPU: vLLM's queues, caches and preemptions, and what the GPUs are doing."""

from __future__ import annotations

from typing import Any

from lanewatch.exporters import names

from .panels import Query, dashboard, timeline, timeseries
from .templating import LANE, RATE, VLLM, either, sel


def _rate(metric: str) -> str:
    return either(metric, lambda name: f"rate({sel(name, VLLM)}[{RATE}])")


def _vllm(metric: str) -> str:
    return sel(metric, VLLM)


def _ratio(numerator: str, denominator: str) -> str:
    return f"sum by (lane, instance) ({_rate(numerator)})\n/\nsum by (lane, instance) ({_rate(denominator)})"


def _vllm_panels() -> list[Any]:
    by = "sum by (lane, instance)"
    return [
        timeseries(
            "Requests running and waiting",
            "vLLM requests in the running batch and waiting for a slot, per server. Red line at 10 "
            "waiting (LanewatchVLLMRequestsWaiting): the server is at capacity and queue time adds to "
            "TTFT; add replicas or shed batch traffic.",
            [
                Query(f"{by} ({sel(names.VLLM_NUM_REQUESTS_RUNNING, VLLM)})", "{{instance}} running"),
                Query(f"{by} ({sel(names.VLLM_NUM_REQUESTS_WAITING, VLLM)})", "{{instance}} waiting"),
            ],
            "short",
            [("green", None), ("red", 10)],
        ),
        timeseries(
            "KV-cache usage",
            "Share of the KV cache in use per server. Orange above 80%, red above 90% "
            "(LanewatchVLLMKVCacheFull): new requests wait and running ones get preempted; lower "
            "max_num_seqs or max_model_len, or add GPU memory.",
            [
                Query(
                    f"max by (lane, instance) ({either(names.VLLM_KV_CACHE_USAGE_PERC, _vllm)})",
                    "{{instance}}",
                )
            ],
            "percentunit",
            [("green", None), ("orange", 0.8), ("red", 0.9)],
        ),
        timeseries(
            "Prefix-cache hit rate",
            "Prompt tokens served from the prefix cache over prompt tokens looked up. Red below 10% "
            "when prompts share a system prompt: check --enable-prefix-caching and that routing keeps "
            "a conversation on one server.",
            [
                Query(
                    _ratio(names.VLLM_PREFIX_CACHE_HITS_TOTAL, names.VLLM_PREFIX_CACHE_QUERIES_TOTAL),
                    "{{instance}}",
                )
            ],
            "percentunit",
            [("red", None), ("green", 0.1)],
        ),
        timeseries(
            "Speculative decoding acceptance",
            "Accepted draft tokens over drafted tokens (only with speculative decoding). Red below "
            "30%: the draft model guesses badly and costs more than it saves; tune or turn it off.",
            [
                Query(
                    _ratio(
                        names.VLLM_SPEC_DECODE_NUM_ACCEPTED_TOKENS_TOTAL,
                        names.VLLM_SPEC_DECODE_NUM_DRAFT_TOKENS_TOTAL,
                    ),
                    "{{instance}}",
                )
            ],
            "percentunit",
            [("red", None), ("orange", 0.3), ("green", 0.5)],
        ),
        timeseries(
            "Preemptions",
            "Requests preempted per second per server. Red: any (LanewatchVLLMPreemptions after "
            "10m); preempted requests recompute their KV cache and their latency jumps.",
            [Query(f"{by} ({_rate(names.VLLM_NUM_PREEMPTIONS_TOTAL)})", "{{instance}}")],
            "reqps",
            [("green", None), ("red", 0.0001)],
        ),
        timeseries(
            "Token throughput",
            "Prompt and generated tokens per second per server. Red: generation stopped while the "
            "server is up; check the running batch and the logs.",
            [
                Query(f"{by} ({_rate(names.VLLM_PROMPT_TOKENS_TOTAL)})", "{{instance}} prompt"),
                Query(f"{by} ({_rate(names.VLLM_GENERATION_TOKENS_TOTAL)})", "{{instance}} generated"),
            ],
            "suffix: tok/s",
            [("red", None), ("green", 0.001)],
        ),
    ]


def _gpu_panels() -> list[Any]:
    peak = names.GPU_HBM_BANDWIDTH_PEAK_BYTES_PER_SECOND
    return [
        timeseries(
            "GPU utilization",
            "Share of time a kernel ran, per GPU (NVML). Orange above 95%: the GPU is the "
            "bottleneck. Red below 5% while requests wait: the engine is stuck, not busy.",
            [Query(names.GPU_UTILIZATION_RATIO, "GPU {{gpu}} {{name}}")],
            "percentunit",
            [("red", None), ("green", 0.05), ("orange", 0.95)],
            w=8,
        ),
        timeseries(
            "GPU memory used",
            "Used over total device memory per GPU. vLLM reserves most of it for the KV cache by "
            "design; red above 98% only matters with other processes on the GPU (out-of-memory risk).",
            [Query(f"{names.GPU_MEMORY_USED_BYTES}\n/\n{names.GPU_MEMORY_TOTAL_BYTES}", "GPU {{gpu}}")],
            "percentunit",
            [("green", None), ("red", 0.98)],
            w=8,
        ),
        timeseries(
            "GPU power",
            "Board power draw per GPU. Red above 700 W (an H100/H200 SXM limit): the GPU may be "
            "power-capped and clocks throttled; check cooling and power limits.",
            [Query(names.GPU_POWER_WATTS, "GPU {{gpu}}")],
            "watt",
            [("green", None), ("red", 700)],
            w=8,
        ),
        timeseries(
            "Decode speed vs the HBM bandwidth bound",
            "Decode streams the weights and KV cache from HBM for every step, so memory bandwidth "
            "bounds its speed: bytes/s moved (DRAM utilization × peak) against the GPU's peak. "
            "No red of its own: when 'used' meets 'peak' decode cannot get faster on this GPU "
            "(the share panel beside it turns red at 95%); quantize, cut KV traffic or add GPUs. "
            "Generated tokens/s are on the throughput panel.",
            [
                Query(
                    f"{names.GPU_DRAM_BANDWIDTH_UTILIZATION_RATIO}\n* on (gpu, uuid)\n{peak}",
                    "GPU {{gpu}} used",
                ),
                Query(peak, "GPU {{gpu}} peak"),
            ],
            "Bps",
            [("green", None)],
        ),
        timeseries(
            "HBM bandwidth used (share of peak)",
            "DRAM bandwidth utilization per GPU (NVML). Orange above 80%, red above 95%: decode is "
            "bandwidth-bound; more batching will not raise tokens/s.",
            [Query(names.GPU_DRAM_BANDWIDTH_UTILIZATION_RATIO, "GPU {{gpu}}")],
            "percentunit",
            [("green", None), ("orange", 0.8), ("red", 0.95)],
        ),
        timeline(
            "Collector scrape of each target",
            "Whether the collector's last scrape of each target's vLLM /metrics worked. Red: down "
            "(LanewatchTargetDown after 2m); the server is down or unreachable.",
            [Query(sel(names.SCRAPE_UP, LANE), "{{target}}")],
            "none",
            [("red", None), ("green", 1)],
            mappings=(("0", "down", "red"), ("1", "up", "green")),
        ),
    ]


def dashboard_server() -> Any:
    """The Server and GPU dashboard."""
    return dashboard(
        names.DASHBOARD_SERVER_UID,
        "lanewatch / Server & GPU",
        "vLLM running and waiting requests, KV and prefix caches, speculative decoding, preemptions, "
        "and GPU utilization, memory, power and bandwidth.",
        [*_vllm_panels(), *_gpu_panels()],
    )
