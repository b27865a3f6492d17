"""The diagnosis's Prometheus edge: one window of evidence per lane through the HTTP API (/api/v1/query).

Each value keeps its query as its source, so the output shows exactly what was asked. A query
that returns nothing (or NaN) leaves its value None: the check that needs it says `unknown` and
names the family. The transport is injectable (httpx.MockTransport in unit tests).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import httpx

from lanewatch.collector.common.errors import UpstreamError
from lanewatch.collector.diagnose.evidence import LaneStats, ServerSeries, Value
from lanewatch.collector.diagnose.queries import TIMEOUT_S, LaneQueries
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from lanewatch.exporters import names

__all__ = ["PrometheusError", "PrometheusSource"]

MAX_BODY_BYTES = 8 * 1024 * 1024  # one answer; a lane's queries return a few series each
MAX_SERIES = 1000  # a query answering more series than this is refused (label cardinality bound)
Sample = tuple[Mapping[str, str], float]


class PrometheusError(UpstreamError):
    """Prometheus could not be queried or answered something that is not a query result."""


class PrometheusSource:
    """Queries one Prometheus for the evidence of a lane over a window."""

    def __init__(
        self, url: str, *, timeout_s: float = TIMEOUT_S, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.Client(base_url=self.url, timeout=timeout_s, transport=transport)
        self.queries: list[str] = []  # every query asked, in order

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def query(self, promql: str) -> list[Sample]:
        """An instant query's samples (labels, value); NaN and infinite values left out."""
        self.queries.append(promql)
        status, raw = self._get(promql)
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            raise PrometheusError(f"{self.url}: answered HTTP {status}, not JSON") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise PrometheusError(f"{self.url}: query {promql!r} failed: {str(error)[:200] or status}")
        return _samples(body.get("data"), promql)

    def _get(self, promql: str) -> tuple[int, bytes]:
        """The answer's status and body, read up to MAX_BODY_BYTES (a bigger one is refused)."""
        try:
            with self._client.stream("GET", "/api/v1/query", params={"query": promql}) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise PrometheusError(f"{self.url}: answer to {promql!r} over {MAX_BODY_BYTES} bytes")
                    chunks.append(chunk)
                return response.status_code, b"".join(chunks)
        except httpx.HTTPError as exc:
            raise PrometheusError(f"{self.url}: cannot query: {exc}") from None

    def scalar(self, promql: str) -> Value | None:
        """The first sample's value as a Value carrying its query, or None."""
        samples = self.query(promql)
        return Value(samples[0][1], promql) if samples else None

    def by_label(self, promql: str, label: str) -> dict[str, float]:
        """Sample values keyed by one label."""
        return {labels.get(label, ""): value for labels, value in self.query(promql)}

    def lane_stats(self, q: LaneQueries, t: Thresholds = DEFAULT_THRESHOLDS) -> LaneStats:
        """lanewatch's own request series for one lane."""
        requests = self.scalar(q.requests())
        errors = {k: round(v) for k, v in self.by_label(q.errors(), names.ERROR_KIND).items() if v > 0}
        n = round(requests.value) if requests else 0
        quantiles: dict[str, Value] = {}
        for metric in ("ttft", "tpot", "e2e", "itl"):
            for qq in (0.5, t.slo_quantile):
                value = self.scalar(q.quantile(metric, qq))
                if value is not None:
                    quantiles[f"{metric}_p{round(qq * 100)}"] = value
        means = {m: v for m in ("ttft", "tpot", "e2e") if (v := self.scalar(q.mean(m))) is not None}
        parts, server_phases = self._parts(q)
        return LaneStats(
            requests=n,
            ok_requests=max(n - sum(errors.values()), 0),
            quantiles=quantiles,
            means=means,
            parts=parts,
            server_phases=server_phases,
            errors=errors,
            errors_source=f"{q.errors()} / {q.requests()}",
            class_e2e_means=self.by_label(q.class_means(), names.REQUEST_CLASS),
            class_source=q.class_means(),
            fit_fixed_share=self.scalar(q.fit_fixed_share()),
        )

    def _parts(self, q: LaneQueries) -> tuple[dict[str, Value], bool]:
        sums = self.by_label(q.phase_sums(), names.PHASE)
        counts = self.by_label(q.phase_counts(), names.PHASE)
        total = counts.get("decode", 0.0)  # every record with a breakdown has a decode part
        if total <= 0:
            return {}, False
        source = f"{q.phase_sums()} / decode of {q.phase_counts()}"
        parts = {p: Value(s / total, source) for p, s in sums.items()}
        return parts, counts.get("queue", 0.0) * 2 >= total

    def server_series(self, q: LaneQueries) -> ServerSeries:
        """vLLM's series for the lane's servers."""
        return ServerSeries(
            running=self.scalar(q.gauge(names.VLLM_NUM_REQUESTS_RUNNING)),
            waiting=self.scalar(q.gauge(names.VLLM_NUM_REQUESTS_WAITING)),
            kv_usage=self.scalar(q.gauge(names.VLLM_KV_CACHE_USAGE_PERC, "max")),
            preemptions_per_s=self.scalar(q.counter_rate(names.VLLM_NUM_PREEMPTIONS_TOTAL)),
            prefix_hit_rate=self.scalar(
                q.ratio(names.VLLM_PREFIX_CACHE_HITS_TOTAL, names.VLLM_PREFIX_CACHE_QUERIES_TOTAL)
            ),
            prefix_caching=self._prefix_caching(q),
            step_tokens_p90=self.scalar(q.step_tokens_p90()),
            spec_acceptance_length=self.scalar(q.spec_acceptance_length()),
            finished_per_s=self.scalar(q.counter_rate(names.VLLM_REQUEST_SUCCESS_TOTAL)),
        )

    def _prefix_caching(self, q: LaneQueries) -> Value | None:
        flags = self.by_label(q.prefix_caching(), "enable_prefix_caching")
        if not flags:
            return None
        on = all(flag.lower() == "true" for flag in flags)
        return Value(1.0 if on else 0.0, f"{q.prefix_caching()} (enable_prefix_caching={','.join(flags)})")


def _samples(data: object, promql: str) -> list[Sample]:
    if not isinstance(data, dict):
        raise PrometheusError(f"query {promql!r}: no data in the answer")
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar" and isinstance(result, list) and len(result) == 2:
        value = _number(result[1])
        return [] if value is None else [({}, value)]
    if kind != "vector" or not isinstance(result, list):
        raise PrometheusError(f"query {promql!r}: expected an instant vector, got {kind}")
    if len(result) > MAX_SERIES:
        raise PrometheusError(f"query {promql!r}: {len(result)} series, more than {MAX_SERIES}")
    out: list[Sample] = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("value"), list) or len(item["value"]) != 2:
            raise PrometheusError(f"query {promql!r}: a sample is not [time, value]")
        metric = item.get("metric") or {}
        value = _number(item["value"][1])
        if value is not None and isinstance(metric, dict):
            out.append(({str(k): str(v) for k, v in metric.items()}, value))
    return out


def _number(text: object) -> float | None:
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value if math.isfinite(value) else None
