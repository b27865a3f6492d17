"""vLLM's per-request metrics, read off the response itself.

Run with `--enable-per-request-metrics`, vLLM puts `metrics: {time_to_first_token_ms,
generation_time_ms, queue_time_ms, mean_itl_ms, tokens_per_second}` on the final usage chunk
of a stream (which needs `stream_options.include_usage`) or on a non-streamed body; nothing,
or null, for n > 1, and a field is left out when vLLM lacks its timestamps. From vLLM's
`build_per_request_timing_metrics`:

    queue_time_ms          = scheduled - queued          (the span's time_in_queue)
    time_to_first_token_ms = first token - scheduled     (the span's time_in_model_prefill;
                                                          not TTFT from arrival)
    generation_time_ms     = last token - first token    (the span's time_in_model_decode)
    mean_itl_ms            = generation / (tokens - 1)
    tokens_per_second      = tokens / (last token - scheduled)

So the three phases a record gets from a joined span can come from the response instead,
without any OTLP plumbing. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # common/ imports no other room at run time; only the annotations name the record
    from lanewatch.collector.record.timing import RequestTiming

METRICS_KEY = b'"metrics":'
_WINDOW = 4096  # the metrics object is ~200 bytes; speculative-decoding stats may follow inside it


@dataclass(frozen=True, slots=True)
class ResponseMetrics:
    """One response's per-request metrics, in seconds (tokens per second for throughput)."""

    queue_s: float | None = None
    ttft_s: float | None = None  # from scheduling to the first token: vLLM's prefill
    generation_s: float | None = None  # first to last output token: vLLM's decode
    mean_itl_s: float | None = None
    tokens_per_s: float | None = None


def parse_metrics(obj: Any) -> ResponseMetrics | None:
    """The metrics in a decoded `metrics` object; None when it holds none (null, n > 1, no keys)."""
    if not isinstance(obj, dict):
        return None
    m = ResponseMetrics(
        queue_s=_ms(obj.get("queue_time_ms")),
        ttft_s=_ms(obj.get("time_to_first_token_ms")),
        generation_s=_ms(obj.get("generation_time_ms")),
        mean_itl_s=_ms(obj.get("mean_itl_ms")),
        tokens_per_s=_number(obj.get("tokens_per_second")),
    )
    return None if m == ResponseMetrics() else m


def metrics_in(data: bytes) -> ResponseMetrics | None:
    """The metrics object in raw response bytes (a usage chunk, a body), found without decoding the rest.

    JSON escapes quotes inside strings, so `"metrics":` can only be a key, never generated text.
    """
    pos = data.rfind(METRICS_KEY)
    if pos < 0:
        return None
    text = data[pos + len(METRICS_KEY) : pos + len(METRICS_KEY) + _WINDOW].decode("utf-8", "replace")
    try:
        obj, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except (ValueError, RecursionError):
        return None
    return parse_metrics(obj)


def with_response_metrics(record: RequestTiming, m: ResponseMetrics | None) -> RequestTiming:
    """The record carrying the response's metrics; its phases too, unless a span already gave them."""
    if m is None:
        return record
    changes: dict[str, Any] = {
        "response_queue_s": m.queue_s,
        "response_ttft_s": m.ttft_s,
        "response_generation_s": m.generation_s,
        "response_mean_itl_s": m.mean_itl_s,
        "response_tokens_per_s": m.tokens_per_s,
    }
    phases = (m.queue_s, m.ttft_s, m.generation_s)
    if record.phases_source != "span" and all(p is not None for p in phases):
        changes.update(
            queue_s=m.queue_s, prefill_s=m.ttft_s, decode_s=m.generation_s, phases_source="response"
        )
    return dataclasses.replace(record, **changes)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def _ms(value: Any) -> float | None:
    number = _number(value)
    return None if number is None else number / 1000.0
