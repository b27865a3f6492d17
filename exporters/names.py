"""Every metric name, label, unit and bucket lanewatch exposes or reads: the conventions.

Exporters, alert rules and dashboards take names from here and nowhere else, so a
rename is one edit. Names follow Prometheus conventions (base units, `_total` on
counters, `_seconds`, `_bytes`, `_ratio`); where the OpenTelemetry GenAI semantic
conventions define an equivalent, `OTEL_EQUIVALENT` records it.
"""

from __future__ import annotations

from typing import Final

PREFIX: Final = "lanewatch"

# ---------------------------------------------------------------- labels
TARGET: Final = "target"  # configured target name (one vLLM endpoint or a gateway)
LANE: Final = "lane"  # routing lane, e.g. fast / slow
REQUEST_CLASS: Final = "request_class"  # request class, e.g. short / summary / story
MODEL: Final = "model"
SOURCE: Final = "source"  # probe | tap | envoy
PHASE: Final = "phase"
ERROR_KIND: Final = "error_kind"
TOKEN_TYPE: Final = "token_type"  # input | output (OTel gen_ai.token.type)
SLO: Final = "slo"
SEVERITY: Final = "severity"
QUANTILE: Final = "quantile"

# Labels carried by every request-level series.
REQUEST_LABELS: Final = (TARGET, LANE, REQUEST_CLASS, MODEL, SOURCE)
# Value a label takes once its cardinality cap is reached.
OVERFLOW_VALUE: Final = "__overflow__"
# Value of a closed label (lane, request class) for a value its set does not hold.
OTHER_VALUE: Final = "other"

# ---------------------------------------------------------------- request metrics (probe + tap)
TTFT_SECONDS: Final = f"{PREFIX}_ttft_seconds"  # histogram
TPOT_SECONDS: Final = f"{PREFIX}_tpot_seconds"  # histogram
ITL_SECONDS: Final = f"{PREFIX}_itl_seconds"  # histogram, one sample per gap
E2E_SECONDS: Final = f"{PREFIX}_e2e_seconds"  # histogram
TTFB_SECONDS: Final = f"{PREFIX}_ttfb_seconds"  # histogram
PHASE_SECONDS: Final = f"{PREFIX}_phase_seconds"  # histogram, label phase = a breakdown part
OUTPUT_TOKENS: Final = f"{PREFIX}_output_tokens"  # histogram, tokens per request
REQUESTS_TOTAL: Final = f"{PREFIX}_requests_total"  # counter, every finished request
REQUEST_ERRORS_TOTAL: Final = f"{PREFIX}_request_errors_total"  # counter, label error_kind
TOKENS_TOTAL: Final = f"{PREFIX}_tokens_total"  # counter, label token_type
# counter: prompt tokens vLLM reported served from its prefix cache (usage.prompt_tokens_details)
REQUEST_CACHED_PROMPT_TOKENS_TOTAL: Final = f"{PREFIX}_request_cached_prompt_tokens_total"
# Requests judged against every latency SLO of their lane (collector/record/goodput.py); `lane` is the
# lane the request was ROUTED to, `outcome` met | missed | failed.
GOODPUT_REQUESTS_TOTAL: Final = f"{PREFIX}_goodput_requests_total"  # counter
SSE_BAD_DATA_TOTAL: Final = f"{PREFIX}_sse_bad_data_total"  # counter, undecodable SSE events
# counter, label family: observations folded into OVERFLOW_VALUE because the series budget was spent
SERIES_OVERFLOW_TOTAL: Final = f"{PREFIX}_series_overflow_total"
FAMILY: Final = "family"  # a metric family's name
PROBE_START_DELAY_SECONDS: Final = f"{PREFIX}_probe_start_delay_seconds"  # histogram, schedule drift
PROBES_SKIPPED_TOTAL: Final = f"{PREFIX}_probes_skipped_total"  # counter, previous probe still running

# ---------------------------------------------------------------- window analysis (gauges)
WINDOW_QUANTILE_SECONDS: Final = f"{PREFIX}_window_quantile_seconds"  # phase, quantile
FLATNESS_CV: Final = f"{PREFIX}_flatness_cv"  # CV of mean E2E across request classes
FIT_FIXED_SECONDS: Final = f"{PREFIX}_e2e_fit_fixed_seconds"  # e2e = fixed + per_token * out
FIT_PER_TOKEN_SECONDS: Final = f"{PREFIX}_e2e_fit_per_token_seconds"
FIT_FIXED_SHARE_RATIO: Final = f"{PREFIX}_e2e_fit_fixed_share_ratio"
LANE_CONVERGENCE_RATIO: Final = f"{PREFIX}_lane_convergence_ratio"  # fast p99 ttft / slow p99

# ---------------------------------------------------------------- OTLP join
OTLP_SPANS_RECEIVED_TOTAL: Final = f"{PREFIX}_otlp_spans_received_total"
OTLP_SPANS_JOINED_TOTAL: Final = f"{PREFIX}_otlp_spans_joined_total"
OTLP_ORPHAN_SPANS_TOTAL: Final = f"{PREFIX}_otlp_orphan_spans_total"
OTLP_UNJOINED_RECORDS_TOTAL: Final = f"{PREFIX}_otlp_unjoined_records_total"
# counter, label reason: invalid (a time NaN, infinite or negative) | limit (past the per-call bound)
# | join (its record could not take it); refused spans never reach a record
OTLP_SPANS_REFUSED_TOTAL: Final = f"{PREFIX}_otlp_spans_refused_total"
OTLP_REFUSAL_REASONS: Final = ("invalid", "limit", "join")
# OTLP log records (Envoy's access log): taken as records, or refused one by one (not an access-log
# entry, a value the mapping refuses, past the per-call bound)
OTLP_LOG_RECORDS_RECEIVED_TOTAL: Final = f"{PREFIX}_otlp_log_records_received_total"
OTLP_LOG_RECORDS_REFUSED_TOTAL: Final = f"{PREFIX}_otlp_log_records_refused_total"
# Records posted to POST /v1/records refused one by one (a value no reader can use, or no real
# request's: collector/record/plausible.py); the batch's other records are taken
INGEST_RECORDS_REFUSED_TOTAL: Final = f"{PREFIX}_ingest_records_refused_total"

# ---------------------------------------------------------------- the fast guard (collector/guard/)
GUARD_FIRING: Final = f"{PREFIX}_guard_firing"  # gauge 0/1 per lane and slo
GUARD_VERDICTS_TOTAL: Final = f"{PREFIX}_guard_verdicts_total"  # counter; verdict = met | missed
GUARD_WINDOW_REQUESTS: Final = f"{PREFIX}_guard_window_requests"  # gauge; outcome = judged | missed
GUARD_LAST_CHANGE_SECONDS: Final = f"{PREFIX}_guard_last_change_timestamp_seconds"
GUARD_ALERT_POSTS_TOTAL: Final = f"{PREFIX}_guard_alert_posts_total"  # counter; result = ok | failed
GUARD_PROGRESS_REFUSED_TOTAL: Final = f"{PREFIX}_guard_progress_events_refused_total"
VERDICT: Final = "verdict"
RESULT: Final = "result"

# ---------------------------------------------------------------- vLLM scrape (re-exported per target)
SCRAPE_UP: Final = f"{PREFIX}_scrape_up"  # gauge 0/1 per target
SCRAPE_ERRORS_TOTAL: Final = f"{PREFIX}_scrape_errors_total"
SCRAPE_DURATION_SECONDS: Final = f"{PREFIX}_scrape_duration_seconds"
SERVER_PHASE_QUANTILE_SECONDS: Final = f"{PREFIX}_server_phase_quantile_seconds"  # phase, quantile
SERVER_REQUESTS_RUNNING: Final = f"{PREFIX}_server_requests_running"
SERVER_REQUESTS_WAITING: Final = f"{PREFIX}_server_requests_waiting"
SERVER_KV_CACHE_USAGE_RATIO: Final = f"{PREFIX}_server_kv_cache_usage_ratio"
SERVER_PREFIX_CACHE_HIT_RATIO: Final = f"{PREFIX}_server_prefix_cache_hit_ratio"
SERVER_SPEC_DECODE_ACCEPTANCE_RATIO: Final = f"{PREFIX}_server_spec_decode_acceptance_ratio"
SERVER_PREEMPTIONS_TOTAL: Final = f"{PREFIX}_server_preemptions_total"
# gauge 1 per (target, family): a vLLM family lanewatch reads that the target's page lacks, under
# its current and every older name (panels and rules built on it stay empty for that target).
SCRAPE_MISSING_FAMILIES: Final = f"{PREFIX}_scrape_missing_families"

# ---------------------------------------------------------------- GPU (NVML); labels gpu, uuid, name
GPU_UTILIZATION_RATIO: Final = f"{PREFIX}_gpu_utilization_ratio"
GPU_MEMORY_USED_BYTES: Final = f"{PREFIX}_gpu_memory_used_bytes"
GPU_MEMORY_TOTAL_BYTES: Final = f"{PREFIX}_gpu_memory_total_bytes"
GPU_POWER_WATTS: Final = f"{PREFIX}_gpu_power_watts"
GPU_TEMPERATURE_CELSIUS: Final = f"{PREFIX}_gpu_temperature_celsius"
GPU_SM_CLOCK_HERTZ: Final = f"{PREFIX}_gpu_sm_clock_hertz"
GPU_MEMORY_CLOCK_HERTZ: Final = f"{PREFIX}_gpu_memory_clock_hertz"
GPU_HBM_BANDWIDTH_PEAK_BYTES_PER_SECOND: Final = f"{PREFIX}_gpu_hbm_bandwidth_peak_bytes_per_second"
GPU_DRAM_BANDWIDTH_UTILIZATION_RATIO: Final = f"{PREFIX}_gpu_dram_bandwidth_utilization_ratio"
GPU_LABELS: Final = ("gpu", "uuid", "name")

# ---------------------------------------------------------------- gateway
GATEWAY_REQUESTS_TOTAL: Final = f"{PREFIX}_gateway_requests_total"  # lane, served_lane, degraded
GATEWAY_INFLIGHT: Final = f"{PREFIX}_gateway_inflight_requests"  # lane, upstream
GATEWAY_UPSTREAM_HEALTHY: Final = f"{PREFIX}_gateway_upstream_healthy"  # lane, upstream
GATEWAY_SHED_TOTAL: Final = f"{PREFIX}_gateway_shed_total"  # lane (routed to), request_class
GATEWAY_DEGRADE_APPLIED_TOTAL: Final = f"{PREFIX}_gateway_degrade_applied_total"  # lane, action
GATEWAY_UPSTREAM_ERRORS_TOTAL: Final = f"{PREFIX}_gateway_upstream_errors_total"  # lane, upstream, error_kind
GATEWAY_REFUSED_REQUESTS_TOTAL: Final = f"{PREFIX}_gateway_refused_requests_total"  # code
# The rescue of late requests: lane (late), to_lane (faster), outcome: won | lost | failed (a rescue
# sent) or why none was (throttled | target_degraded | target_protecting | target_over_slo).
GATEWAY_RESCUES_TOTAL: Final = f"{PREFIX}_gateway_rescues_total"
GATEWAY_DEGRADE_STATE_VERSION: Final = f"{PREFIX}_gateway_degrade_state_version"  # gauge, bumps per change
GATEWAY_DEGRADE_REFUSED_TOTAL: Final = f"{PREFIX}_gateway_degrade_refused_total"  # reason
# Info-style gauge (always 1): each lane's models, declared or learned from its upstreams' /v1/models;
# at most model_discovery.max_models a lane, so the series are bounded.
GATEWAY_LANE_MODEL_INFO: Final = f"{PREFIX}_gateway_lane_model_info"  # lane, model, source
GATEWAY_MODEL_DISCOVERY_FAILURES_TOTAL: Final = f"{PREFIX}_gateway_model_discovery_failures_total"  # lane
# A lane listing a model another lane owns (declared there, or listed there first); once per new pair.
GATEWAY_MODEL_COLLISIONS_TOTAL: Final = f"{PREFIX}_gateway_model_collisions_total"  # lane
# Shipping tap records to the collector (gateway.collector_url).
GATEWAY_SHIPPED_RECORDS_TOTAL: Final = f"{PREFIX}_gateway_shipped_records_total"  # the collector took them
GATEWAY_SHIP_SEND_FAILURES_TOTAL: Final = f"{PREFIX}_gateway_ship_send_failures_total"  # retried later
GATEWAY_SHIP_DROPPED_RECORDS_TOTAL: Final = f"{PREFIX}_gateway_ship_dropped_records_total"  # reason
GATEWAY_SHIP_QUEUED_RECORDS: Final = f"{PREFIX}_gateway_ship_queued_records"  # gauge
CODE: Final = "code"  # the HTTP status answered
REASON: Final = "reason"  # queue_full | rejected | refused | unencodable | shutdown; stale_revision | ...
SERVED_LANE: Final = "served_lane"
UPSTREAM: Final = "upstream"
DEGRADED: Final = "degraded"  # comma list of degrade actions applied, or "none"

# ---------------------------------------------------------------- degrade controller
DEGRADE_ACTIVE: Final = f"{PREFIX}_degrade_active"  # gauge 0/1: lane, action
DEGRADE_SHIFT_RATIO: Final = f"{PREFIX}_degrade_shift_ratio"  # gauge 0..1: lane, to_lane
DEGRADE_MAX_TOKENS_CAP: Final = f"{PREFIX}_degrade_max_tokens_cap"  # gauge: lane (0 = no cap)
DEGRADE_TRANSITIONS_TOTAL: Final = f"{PREFIX}_degrade_transitions_total"  # lane, action, direction
DEGRADE_ADAPTER_FAILURES_TOTAL: Final = f"{PREFIX}_degrade_adapter_failures_total"  # adapter, reason
# actions an adapter cannot take (its router has no way to), skipped: adapter, action
DEGRADE_ADAPTER_SKIPPED_TOTAL: Final = f"{PREFIX}_degrade_adapter_skipped_total"
DEGRADE_NOTIFICATIONS_TOTAL: Final = f"{PREFIX}_degrade_notifications_total"  # outcome
DEGRADE_ALERTS_TOTAL: Final = f"{PREFIX}_degrade_alerts_total"  # outcome (fired, duplicate, stale, ...)
DEGRADE_ADAPTER_SYNCED: Final = f"{PREFIX}_degrade_adapter_synced"  # gauge 0/1: adapter
DEGRADE_STATE_REVISION: Final = f"{PREFIX}_degrade_state_revision"  # gauge: stored state revision
DEGRADE_LEADER: Final = f"{PREFIX}_degrade_leader"  # gauge 0/1: this controller leads (always 1 alone)
ACTION: Final = "action"
ACTION_DEGRADE: Final = (
    "degrade"  # `action` label of mitigation alerts: Alertmanager routes them to the controller
)
TO_LANE: Final = "to_lane"
ADAPTER: Final = "adapter"
DIRECTION: Final = "direction"  # apply | escalate | restore
OUTCOME: Final = "outcome"

# ---------------------------------------------------------------- vLLM names read by rules and dashboards
# vLLM's own metric names (V1 engine), as its /metrics page serves them; older names below.
VLLM_LABELS: Final = ("model_name", "engine")
VLLM_NUM_REQUESTS_RUNNING: Final = "vllm:num_requests_running"
VLLM_NUM_REQUESTS_WAITING: Final = "vllm:num_requests_waiting"
VLLM_KV_CACHE_USAGE_PERC: Final = "vllm:kv_cache_usage_perc"
VLLM_PROMPT_TOKENS_TOTAL: Final = "vllm:prompt_tokens_total"
VLLM_GENERATION_TOKENS_TOTAL: Final = "vllm:generation_tokens_total"
VLLM_PREFIX_CACHE_QUERIES_TOTAL: Final = "vllm:prefix_cache_queries_total"
VLLM_PREFIX_CACHE_HITS_TOTAL: Final = "vllm:prefix_cache_hits_total"
VLLM_NUM_PREEMPTIONS_TOTAL: Final = "vllm:num_preemptions_total"
VLLM_REQUEST_SUCCESS_TOTAL: Final = "vllm:request_success_total"
VLLM_SPEC_DECODE_NUM_DRAFTS_TOTAL: Final = "vllm:spec_decode_num_drafts_total"
VLLM_SPEC_DECODE_NUM_DRAFT_TOKENS_TOTAL: Final = "vllm:spec_decode_num_draft_tokens_total"
VLLM_SPEC_DECODE_NUM_ACCEPTED_TOKENS_TOTAL: Final = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_TIME_TO_FIRST_TOKEN_SECONDS: Final = "vllm:time_to_first_token_seconds"
VLLM_INTER_TOKEN_LATENCY_SECONDS: Final = "vllm:inter_token_latency_seconds"
VLLM_REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS: Final = "vllm:request_time_per_output_token_seconds"
VLLM_E2E_REQUEST_LATENCY_SECONDS: Final = "vllm:e2e_request_latency_seconds"
VLLM_REQUEST_QUEUE_TIME_SECONDS: Final = "vllm:request_queue_time_seconds"
VLLM_REQUEST_INFERENCE_TIME_SECONDS: Final = "vllm:request_inference_time_seconds"
VLLM_REQUEST_PREFILL_TIME_SECONDS: Final = "vllm:request_prefill_time_seconds"
VLLM_REQUEST_DECODE_TIME_SECONDS: Final = "vllm:request_decode_time_seconds"
VLLM_REQUEST_PROMPT_TOKENS: Final = "vllm:request_prompt_tokens"
VLLM_REQUEST_GENERATION_TOKENS: Final = "vllm:request_generation_tokens"
# Read by the diagnosis (collector/diagnose): tokens per engine step (a histogram) and the
# cache configuration (an info gauge; label enable_prefix_caching).
VLLM_ITERATION_TOKENS_TOTAL: Final = "vllm:iteration_tokens_total"
VLLM_CACHE_CONFIG_INFO: Final = "vllm:cache_config_info"
# Every vLLM family lanewatch reads (scraper, rules or dashboards), by its current name.
VLLM_READ_FAMILIES: Final = (
    VLLM_NUM_REQUESTS_RUNNING,
    VLLM_NUM_REQUESTS_WAITING,
    VLLM_KV_CACHE_USAGE_PERC,
    VLLM_PROMPT_TOKENS_TOTAL,
    VLLM_GENERATION_TOKENS_TOTAL,
    VLLM_PREFIX_CACHE_QUERIES_TOTAL,
    VLLM_PREFIX_CACHE_HITS_TOTAL,
    VLLM_NUM_PREEMPTIONS_TOTAL,
    VLLM_SPEC_DECODE_NUM_DRAFT_TOKENS_TOTAL,
    VLLM_SPEC_DECODE_NUM_ACCEPTED_TOKENS_TOTAL,
    VLLM_TIME_TO_FIRST_TOKEN_SECONDS,
    VLLM_INTER_TOKEN_LATENCY_SECONDS,
    VLLM_REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS,
    VLLM_E2E_REQUEST_LATENCY_SECONDS,
    VLLM_REQUEST_QUEUE_TIME_SECONDS,
    VLLM_REQUEST_PREFILL_TIME_SECONDS,
    VLLM_REQUEST_DECODE_TIME_SECONDS,
)
# Families vLLM exposes only with a feature on (speculative decoding): absent is not a version gap.
VLLM_OPTIONAL_FAMILIES: Final = frozenset(
    {VLLM_SPEC_DECODE_NUM_DRAFT_TOKENS_TOTAL, VLLM_SPEC_DECODE_NUM_ACCEPTED_TOKENS_TOTAL}
)
# Renamed families: current name -> the older names of the same quantity, newest first. The
# scraper reads an older name as the current one; rules and dashboards query `(current or older)`.
# kv_cache_usage_perc and prefix_cache_* arrived in 0.9 beside the old names (both exposed until the
# old ones were hidden); inter_token_latency_seconds replaced time_per_output_token_seconds in 0.11.
VLLM_RENAMES: Final = {
    VLLM_KV_CACHE_USAGE_PERC: ("vllm:gpu_cache_usage_perc",),
    VLLM_PREFIX_CACHE_QUERIES_TOTAL: ("vllm:gpu_prefix_cache_queries_total",),
    VLLM_PREFIX_CACHE_HITS_TOTAL: ("vllm:gpu_prefix_cache_hits_total",),
    VLLM_INTER_TOKEN_LATENCY_SECONDS: ("vllm:time_per_output_token_seconds",),
}
# Older name -> current name (the same table, inverted).
VLLM_LEGACY_ALIASES: Final = {old: new for new, olds in VLLM_RENAMES.items() for old in olds}


def vllm_family_names(current: str) -> tuple[str, ...]:
    """A vLLM family's current name followed by its older names (just the name when never renamed)."""
    return (current, *VLLM_RENAMES.get(current, ()))


# V0's spec-decode acceptance gauge; V1 has counters (accepted / draft tokens) instead.
VLLM_LEGACY_SPEC_DECODE_DRAFT_ACCEPTANCE_RATE: Final = "vllm:spec_decode_draft_acceptance_rate"

# ---------------------------------------------------------------- buckets
# 1 ms to 60 s, fine below 100 ms for a fast lane; every SLO threshold must be one of these.
LATENCY_BUCKETS: Final = (
    0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.075,
    0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0,
    7.5, 10.0, 15.0, 20.0, 30.0, 60.0,
)  # fmt: skip
TOKEN_BUCKETS: Final = (1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)

# ---------------------------------------------------------------- rules
RULE_GROUP_PREFIX: Final = f"{PREFIX}-slo"
SLI_ERROR_RATIO: Final = "slo:sli_error:ratio_rate"  # + window, e.g. slo:sli_error:ratio_rate5m
OBJECTIVE_RATIO: Final = "slo:objective:ratio"
ERROR_BUDGET_RATIO: Final = "slo:error_budget:ratio"
TIME_PERIOD_DAYS: Final = "slo:time_period:days"
CURRENT_BURN_RATE_RATIO: Final = "slo:current_burn_rate:ratio"
PERIOD_BURN_RATE_RATIO: Final = "slo:period_burn_rate:ratio"
PERIOD_ERROR_BUDGET_REMAINING_RATIO: Final = "slo:period_error_budget_remaining:ratio"
SLO_INFO: Final = f"{PREFIX}_slo_info"  # recorded 1 per SLO: lane, slo, objective, threshold, period
# Lane analysis recorded by the rules over the spec's analysis window (dashboards read them too).
LANE_TTFT_P99: Final = f"lane:{TTFT_SECONDS}:p99"
LANE_P99_CONVERGENCE_RATIO: Final = f"lane:{TTFT_SECONDS}:p99_convergence_ratio"  # + label slow_lane
CLASS_E2E_MEAN: Final = f"lane_request_class:{E2E_SECONDS}:mean"
LANE_FLATNESS_CV: Final = f"lane:{E2E_SECONDS}:class_cv"
# Goodput: requests that met every latency SLO and did not fail, over all requests routed to the
# lane (gateway sheds count as misses); per source (probe, tap), over the analysis window.
GOODPUT_RATIO: Final = f"lane_request_class:{PREFIX}_goodput:ratio"  # lane, request_class, source
LANE_GOODPUT_RATIO: Final = f"lane:{PREFIX}_goodput:ratio"  # lane, source
# The diagnosis's signals per lane (label `signal`: a threshold's name in collector/diagnose/
# threshold_rules.py), recorded beside that threshold's value, so a panel shows each against its limit.
DIAGNOSE_SIGNAL: Final = f"lane:{PREFIX}_diagnose_signal:value"  # lane, signal
DIAGNOSE_THRESHOLD: Final = f"{PREFIX}_diagnose_threshold"  # signal; the same value `diagnose` uses
DIAGNOSE_SIGNAL_LABEL: Final = "signal"
SLOW_LANE: Final = "slow_lane"
ALERT_PREFIX: Final = "Lanewatch"  # every alert name starts with it
ALERTS: Final = "ALERTS"  # Prometheus' own series of pending and firing alerts

# ---------------------------------------------------------------- dashboards (uids, linked from alerts)
DASHBOARD_OVERVIEW_UID: Final = f"{PREFIX}-overview"
DASHBOARD_LATENCY_UID: Final = f"{PREFIX}-latency"
DASHBOARD_LANES_UID: Final = f"{PREFIX}-lanes"
DASHBOARD_SERVER_UID: Final = f"{PREFIX}-server"
DASHBOARD_DEGRADE_UID: Final = f"{PREFIX}-degrade"

OTEL_EQUIVALENT: Final = {
    E2E_SECONDS: "gen_ai.client.operation.duration",
    TTFT_SECONDS: "gen_ai.client.operation.time_to_first_chunk",
    TPOT_SECONDS: "gen_ai.client.operation.time_per_output_chunk",
    TOKENS_TOTAL: "gen_ai.client.token.usage",
}


def le(bound: float) -> str:
    """The `le` label value prometheus_client writes for a bucket bound (e.g. 2 -> "2.0")."""
    if bound == float("inf"):
        return "+Inf"
    return repr(float(bound))
