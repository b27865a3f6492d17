"""The one record builder every source fills as its request's life goes on.

A source (the prober, the gateway's tap, Envoy's access log, LiteLLM's handler) creates one
`RecordBuilder` when it knows where the request went, sets what it learns as it learns it (the
connection's phases, the response head, the first token, the end), hands over the answer's usage
object, counted content chunks and per-request metrics, and calls `build()` once. The answer's
derived fields are decided here alone, the same for every source:

- `output_tokens`: the usage object's `completion_tokens` when it gave one (`tokens_from_usage`),
  else the content chunks the source counted;
- every other usage field a record takes (`prompt_tokens`, `cached_prompt_tokens`, ...), through
  the one usage reader, so a new usage field reaches every source's records with no source touched;
- the response's per-request metrics, and the phases they give when no span gave them.

Times are offsets in seconds from the request's start; `started_at` alone is Unix seconds.
Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from lanewatch.collector.openai_api.response_metrics import ResponseMetrics, with_response_metrics
from lanewatch.collector.openai_api.usage import Usage, usage_fields
from lanewatch.collector.record.itl import ItlStats
from lanewatch.collector.record.timing import Api, ErrorKind, RequestTiming, Source

__all__ = ["DERIVED", "RecordBuilder"]

# The record's fields `build()` decides from the answer, not set by a source.
DERIVED: frozenset[str] = frozenset({"output_tokens", "tokens_from_usage", *usage_fields(None)})


@dataclass(slots=True)
class RecordBuilder:
    """One request's record as far as its source knows it yet."""

    source: Source
    target: str
    lane: str
    request_class: str
    model: str
    api: Api = "chat"
    started_at: float = 0.0
    request_id: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    status: int | None = None
    error: ErrorKind | None = None
    error_message: str | None = None
    dns_s: float | None = None
    connect_s: float | None = None
    tls_s: float | None = None
    send_s: float | None = None
    ttfb_s: float | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: tuple[float, ...] = ()
    itl_stats: ItlStats | None = None
    usage: Usage | None = None  # the answer's usage object, as the one usage reader read it
    counted_tokens: int | None = None  # content chunks the source counted, for an answer without usage
    metrics: ResponseMetrics | None = None  # vLLM's per-request metrics, from the response
    late_lane: str | None = None  # a rescue: the lane first asked (the gateway's)
    rescue_sent_s: float | None = None
    late_wait_s: float | None = None
    attrs: dict[str, str] = field(default_factory=dict)
    prompt_text: str | None = None  # opt-in content (export.record_content)
    response_text: str | None = None

    def build(self) -> RequestTiming:
        """The record; RecordError (record/rules.py) naming the field no real request could have."""
        usage = self.usage
        completion = usage.completion_tokens if usage is not None else None
        kwargs = {name: getattr(self, name) for name in _SHARED}
        if self.error is None:
            kwargs["error_message"] = None
        record = RequestTiming(
            **kwargs,
            output_tokens=self.counted_tokens if completion is None else completion,
            tokens_from_usage=completion is not None,
            **usage_fields(usage),  # prompt_tokens, cached_prompt_tokens, ...
        )
        return with_response_metrics(record, self.metrics)


# The fields a source sets and the record takes as they are: every record field not derived.
_SHARED: tuple[str, ...] = tuple(
    f.name
    for f in dataclasses.fields(RequestTiming)
    if f.name not in DERIVED and f.name in RecordBuilder.__slots__
)
