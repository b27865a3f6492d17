"""Latency breakdown: where each lane's time goes, phase by phase, and TTFT/TPOT/ITL/E2E quantiles."""

from __future__ import annotations

from typing import Any

from lanewatch.collector.record.timing import BREAKDOWN_PARTS, SERVER_WAIT
from lanewatch.exporters import names

from .panels import Query, dashboard, timeseries
from .templating import RATE, REQUEST, VLLM, sel

QUANTILES = (0.5, 0.95, 0.99)


def _quantiles(histogram: str, matchers: str) -> list[Query]:
    bucket = sel(f"{histogram}_bucket", matchers)
    return [
        Query(
            f"histogram_quantile({q}, sum by (lane, le) (rate({bucket}[{RATE}])))",
            f"{{{{lane}}}} p{q * 100:g}",
        )
        for q in QUANTILES
    ]


def _breakdown() -> Any:
    parts = "|".join([*BREAKDOWN_PARTS, SERVER_WAIT])
    matchers = f'{REQUEST},{names.PHASE}=~"{parts}"'
    return timeseries(
        "Where the time goes: $lane",
        "Mean seconds per request in each part of the exhaustive breakdown (dns, connect, tls, send, "
        "queue, prefill, residual, decode; server_wait where no vLLM span joined), stacked so the "
        "top is the mean E2E. Red line: 2 s. When it is red, the tallest band is the phase to fix: "
        "queue means too few replicas, prefill long prompts or no prefix cache, decode long outputs "
        "or a slow GPU, connect/tls cold connections.",
        [
            Query(
                f"sum by (phase) (rate({sel(names.PHASE_SECONDS + '_sum', matchers)}[{RATE}]))\n/\n"
                f"sum by (phase) (rate({sel(names.PHASE_SECONDS + '_count', matchers)}[{RATE}]))",
                "{{phase}}",
            )
        ],
        "s",
        [("green", None), ("red", 2)],
        stack=True,
        repeat="lane",
        h=9,
    )


def _metric_panels() -> list[Any]:
    return [
        timeseries(
            "TTFT p50 / p95 / p99",
            "Time to the first content token per lane. Orange line at 0.5 s (the fast lane's SLO "
            "threshold), red at 2 s (the slow lane's). Red: first tokens are slow; check queue and "
            "prefill in the breakdown above.",
            _quantiles(names.TTFT_SECONDS, REQUEST),
            "s",
            [("green", None), ("orange", 0.5), ("red", 2)],
        ),
        timeseries(
            "TPOT p50 / p95 / p99",
            "Time per output token after the first, (e2e − ttft)/(tokens − 1). Red above 50 ms (the "
            "TPOT SLO): decode is slow; check batch size, KV-cache pressure and GPU bandwidth on the "
            "Server & GPU dashboard.",
            _quantiles(names.TPOT_SECONDS, REQUEST),
            "s",
            [("green", None), ("red", 0.05)],
        ),
        timeseries(
            "Inter-token latency p50 / p95 / p99",
            "Gaps between streamed content chunks. Red above 100 ms: users see the stream stutter; "
            "look for preemptions and long prefills interleaved with decode (chunked prefill helps).",
            _quantiles(names.ITL_SECONDS, REQUEST),
            "s",
            [("green", None), ("red", 0.1)],
        ),
        timeseries(
            "E2E p50 / p95 / p99",
            "Whole request time, to the end of the stream. Orange above 10 s, red above 30 s: long "
            "outputs are expected to be long, so read it with the Lanes dashboard's per-class view.",
            _quantiles(names.E2E_SECONDS, REQUEST),
            "s",
            [("green", None), ("orange", 10), ("red", 30)],
        ),
        timeseries(
            "Errors by kind",
            "Failed requests per second by error kind (dns, connect_refused, tls, http_5xx, "
            "ttft_timeout, stall, truncated, ...). Red: any error; the kind says which layer broke.",
            [
                Query(
                    f"sum by (lane, error_kind) (rate({sel(names.REQUEST_ERRORS_TOTAL, REQUEST)}[{RATE}]))",
                    "{{lane}} {{error_kind}}",
                )
            ],
            "reqps",
            [("green", None), ("red", 0.0001)],
        ),
        timeseries(
            "vLLM queue / prefill / decode p95 (server histograms)",
            "vLLM's own phase histograms, per lane (buckets start at 0.3 s, so short phases read as "
            "≤ 0.3 s; exact per-request phases come from the OTLP join above). Red above 1 s of "
            "queueing: the server is saturated.",
            [
                Query(
                    f"histogram_quantile(0.95, sum by (lane, le) (rate({sel(h + '_bucket', VLLM)}[{RATE}])))",
                    f"{{{{lane}}}} {label}",
                )
                for h, label in (
                    (names.VLLM_REQUEST_QUEUE_TIME_SECONDS, "queue"),
                    (names.VLLM_REQUEST_PREFILL_TIME_SECONDS, "prefill"),
                    (names.VLLM_REQUEST_DECODE_TIME_SECONDS, "decode"),
                )
            ],
            "s",
            [("green", None), ("red", 1)],
        ),
    ]


def dashboard_latency() -> Any:
    """The Latency breakdown dashboard."""
    return dashboard(
        names.DASHBOARD_LATENCY_UID,
        "lanewatch / Latency breakdown",
        "Every request's latency split into phases, per lane, and TTFT, TPOT, ITL and E2E quantiles.",
        [_breakdown(), *_metric_panels()],
    )
