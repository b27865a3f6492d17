"""Every threshold the diagnosis checks use, defined once, with its default and where it comes from.

Pure: a frozen pydantic model, so the CLI, the report, the controller and (later) the generated
recording rules read the same values. A field's description states what it bounds and its source;
docs/diagnose.md lists them from this model (a test keeps the page in step). The same model
holds which checks run (`checks`, `skip`: the config's `diagnose:` section is this model); the
registry refuses an id no check has, naming it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

__all__ = ["CHOICE", "DEFAULT_THRESHOLDS", "Thresholds"]

# The fields that choose checks rather than bound a signal.
CHOICE = ("checks", "skip")
CheckId = Annotated[str, StringConstraints(pattern=r"^[a-z-]+/[a-z-]+$")]

_PUBLISHED_KV = "published: vLLM's Grafana KV-cache dashboard (orange at 0.9), AIPerf and llm-d (> 0.9)"


class Thresholds(BaseModel):
    """The diagnosis thresholds; the defaults are the published reading rules or starting points."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_requests: int = Field(
        20, ge=1, description="Requests a lane needs in the window before a check judges it (starting point)."
    )
    slo_quantile: float = Field(
        0.99,
        gt=0,
        lt=1,
        description="Quantile compared with each latency SLO: the lane misses it when this quantile is over "
        "(as lanewatch's latency alerts read P99).",
    )
    waiting_above: float = Field(
        0.0,
        ge=0,
        description="Mean `vllm:num_requests_waiting` over the window above this means requests wait for a "
        "batch slot (published: llm-d, any non-zero waiting is saturation).",
    )
    waiting_explains: float = Field(
        0.5,
        gt=0,
        le=1,
        description="vLLM's queue is the cause only when its mean waiting over its finish rate (Little's "
        "law: mean wait = mean queue length / throughput) is at least this share of the measured mean queue "
        "time; a queue that rarely holds a request does not explain seconds of waiting (starting point).",
    )
    kv_usage: float = Field(
        0.9, gt=0, le=1, description=f"KV-cache usage at or above this is the memory limit ({_PUBLISHED_KV})."
    )
    preemptions_per_s: float = Field(
        0.001,
        ge=0,
        description="Preemptions per second above this mean memory pressure (published: vLLM's Grafana "
        "KV-cache dashboard, orange above 0.001/s; AIPerf, any preemption).",
    )
    queue_share: float = Field(
        0.4,
        gt=0,
        le=1,
        description="Queue time's share of mean TTFT that makes a lane queue-bound (starting point).",
    )
    step_budget_share: float = Field(
        0.9,
        gt=0,
        le=1,
        description="P90 tokens per engine step (`vllm:iteration_tokens_total`) at or above this share of "
        "`--max-num-batched-tokens` means steps run at the token budget (starting point).",
    )
    prefill_share: float = Field(
        0.4,
        gt=0,
        le=1,
        description="Prefill's share of mean TTFT that makes a lane prefill-bound (starting point).",
    )
    prefix_hit_rate: float = Field(
        0.3,
        ge=0,
        le=1,
        description="A prefix-cache hit rate (hits / queries, in tokens) below this is low reuse (starting "
        "point; llm-d: a low hit rate means the router is not routing for reuse).",
    )
    itl_tail_ratio: float = Field(
        4.0,
        gt=1,
        description="ITL P99 over ITL P50 at or above this means decodes stall (starting point; "
        "Sarathi-Serve's generation stalls).",
    )
    fluidity: float = Field(
        0.9,
        gt=0,
        le=1,
        description="A fluidity index (1 - missed per-token deadlines / all deadlines, Metron) below this "
        "means stalls that mean TPOT hides (starting point).",
    )
    stall_long_prompt_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="The share of stalls that overlap a long-prompt arrival at or above which the stalls "
        "are prefill/decode interference (starting point).",
    )
    decode_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Decode's share of mean E2E that makes a lane missing its TPOT SLO decode-bound "
        "(starting point; decode is most of E2E in every healthy lane, so it never counts alone).",
    )
    spec_acceptance_length: float = Field(
        1.5,
        gt=1,
        description="A mean acceptance length (1 + accepted / drafts) below this means speculative decoding "
        "costs more than it saves (starting point).",
    )
    connection_share: float = Field(
        0.2,
        gt=0,
        le=1,
        description="DNS + connect + TLS share of mean client TTFT that makes connection set-up a cause "
        "(starting point).",
    )
    keepalive_s: float = Field(
        5.0,
        gt=0,
        description="The server's idle keep-alive: a client that pauses longer pays a new connection "
        "(published: uvicorn's default, which vLLM's HTTP server uses).",
    )
    outside_share: float = Field(
        0.3,
        gt=0,
        le=1,
        description="The share of mean client TTFT outside the engine (TTFT - send - queue - prefill and "
        "connection set-up) that makes the front end, gateway or network a cause (starting point).",
    )
    flat_cv: float = Field(
        0.1,
        gt=0,
        description="A coefficient of variation of mean E2E across request classes below this is flat "
        "latency (as lanewatch's default flatness alert, maxCv 0.1).",
    )
    fixed_share: float = Field(
        0.8,
        gt=0,
        le=1,
        description="The fixed cost's share of mean E2E in the `fixed + per-token x tokens` fit at or "
        "above which latency ignores the work (starting point).",
    )
    convergence_ratio: float = Field(
        0.8,
        gt=0,
        description="The fast lane's P99 TTFT over the slow lane's at or above this means routing stopped "
        "helping (as lanewatch's default convergence alert, ratio 0.8).",
    )
    long_request_share: float = Field(
        0.1,
        gt=0,
        le=1,
        description="The share of a fast lane's requests at least as long (output tokens) as the slow "
        "lane's median at or above which long work is misrouted (starting point).",
    )
    error_share: float = Field(
        0.01,
        gt=0,
        le=1,
        description="The share of requests failed (429, 5xx, stream errors, truncations, timeouts) at or "
        "above which errors and shedding are a finding (starting point; a 99% availability objective).",
    )
    max_num_batched_tokens: int | None = Field(
        None,
        ge=1,
        description="The lane's `--max-num-batched-tokens`, when known: vLLM does not expose it, so the "
        "step-budget signal needs it given.",
    )

    checks: tuple[CheckId, ...] = Field(
        (), description="Run only these checks (ids such as `queue/kv-memory`; empty: every check)."
    )
    skip: tuple[CheckId, ...] = Field((), description="Run every chosen check but these.")


DEFAULT_THRESHOLDS = Thresholds()
