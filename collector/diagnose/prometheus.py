"""The diagnosis's Prometheus edge: one window of evidence per lane through the HTTP API (/api/v1/query).

Each value keeps its query as its source, so the output shows exactly what was asked. A query
that returns nothing (or NaN) leaves its value None: the check that needs it says `unknown` and
names the family. The transport is injectable (httpx.MockTransport in unit tests).

Each query has a deadline (`timeout_s`, from its first byte sent to its answer's last byte read)
and so has the whole run (`deadline_s`, from the source's making): every read and write of the
socket waits at most until the nearer one, so a Prometheus that trickles its answer a byte at a
time ends the query at its deadline, not a read timeout's worth after each byte.
"""

from __future__ import annotations

import json
import math
import ssl
import time
from collections.abc import Callable, Collection, Iterable, Mapping

import httpcore
import httpx

from lanewatch.collector.common.errors import UpstreamError
from lanewatch.collector.diagnose.evidence import LaneStats, ServerSeries, Value
from lanewatch.collector.diagnose.queries import RUN_TIMEOUT_S, TIMEOUT_S, LaneQueries
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
        self,
        url: str,
        *,
        timeout_s: float = TIMEOUT_S,
        deadline_s: float = RUN_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s, self.deadline_s = timeout_s, deadline_s
        self._run_ends = time.monotonic() + deadline_s
        self._deadline = _Deadline()
        transport = transport or _DeadlineTransport(self._deadline)
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
        now = time.monotonic()
        ends = self._deadline.at = min(now + self.timeout_s, self._run_ends)
        try:
            with self._client.stream("GET", "/api/v1/query", params={"query": promql}) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise PrometheusError(f"{self.url}: answer to {promql!r} over {MAX_BODY_BYTES} bytes")
                    chunks.append(chunk)
                    if time.monotonic() >= ends:  # an injected transport's chunks come without a socket
                        raise PrometheusError(self._late(promql, ends == self._run_ends))
                return response.status_code, b"".join(chunks)
        except httpx.HTTPError as exc:
            if isinstance(exc, httpx.TimeoutException) and time.monotonic() >= ends - 0.05:
                raise PrometheusError(self._late(promql, ends == self._run_ends)) from None
            raise PrometheusError(f"{self.url}: cannot query: {exc}") from None
        finally:
            self._deadline.at = math.inf

    def _late(self, promql: str, run: bool) -> str:
        """Why a query ended at its deadline: the run's or its own."""
        if run:
            return f"{self.url}: no answer to {promql!r} within the run's {self.deadline_s:g} s (--deadline)"
        return f"{self.url}: no answer to {promql!r} within its {self.timeout_s:g} s (--query-timeout)"

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

    def server_series(self, q: LaneQueries, keys: Collection[str] | None = None) -> ServerSeries:
        """vLLM's series for the lane's servers: those named in `keys` (ServerSeries fields; None: all)."""
        ask: dict[str, Callable[[], Value | None]] = {
            "running": lambda: self.scalar(q.gauge(names.VLLM_NUM_REQUESTS_RUNNING)),
            "waiting": lambda: self.scalar(q.gauge(names.VLLM_NUM_REQUESTS_WAITING)),
            "kv_usage": lambda: self.scalar(q.gauge(names.VLLM_KV_CACHE_USAGE_PERC, "max")),
            "preemptions_per_s": lambda: self.scalar(q.counter_rate(names.VLLM_NUM_PREEMPTIONS_TOTAL)),
            "prefix_hit_rate": lambda: self.scalar(
                q.ratio(names.VLLM_PREFIX_CACHE_HITS_TOTAL, names.VLLM_PREFIX_CACHE_QUERIES_TOTAL)
            ),
            "prefix_caching": lambda: self._prefix_caching(q),
            "step_tokens_p90": lambda: self.scalar(q.step_tokens_p90()),
            "spec_acceptance_length": lambda: self.scalar(q.spec_acceptance_length()),
            "finished_per_s": lambda: self.scalar(q.counter_rate(names.VLLM_REQUEST_SUCCESS_TOTAL)),
        }
        return ServerSeries(**{k: query() for k, query in ask.items() if keys is None or k in keys})

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


class _Deadline:
    """The moment (time.monotonic) the query under way must be answered by; inf between queries."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at = math.inf

    def left(self, timeout: float | None = None) -> float:
        """The seconds a socket operation may wait: `timeout` cut to the deadline; ReadTimeout past it."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise httpcore.ReadTimeout("deadline passed")
        return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read and write ends by the deadline."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._stream, self._deadline = stream, deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Up to max_bytes, waiting no later than the deadline."""
        return self._stream.read(max_bytes, self._deadline.left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """The buffer, sent by the deadline."""
        self._stream.write(buffer, self._deadline.left(timeout))

    def close(self) -> None:
        """Close the socket."""
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        """The TLS stream over this one, its handshake and its reads held to the deadline too."""
        tls = self._stream.start_tls(ssl_context, server_hostname, self._deadline.left(timeout))
        return _DeadlineStream(tls, self._deadline)

    def get_extra_info(self, info: str) -> object:
        """What the socket says of itself (httpcore asks for the SSL object and the socket)."""
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sync sockets, each connect, read and write held to the deadline."""

    def __init__(self, deadline: _Deadline) -> None:
        self._backend, self._deadline = httpcore.SyncBackend(), deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        """A TCP connection, made by the deadline."""
        stream = self._backend.connect_tcp(
            host, port, self._deadline.left(timeout), local_address, socket_options
        )
        return _DeadlineStream(stream, self._deadline)

    def sleep(self, seconds: float) -> None:
        """Sleep (httpcore's retries)."""
        self._backend.sleep(seconds)


class _DeadlineTransport(httpx.HTTPTransport):
    """httpx's own transport over sockets held to the deadline."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        # httpx builds its pool without a way to give it a network backend: the same pool, with one
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=_DeadlineBackend(deadline)
        )
