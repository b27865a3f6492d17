"""The one record every source yields: the timing of one LLM request, phase by phase.

Client-side times are measured from the request's start on a monotonic clock;
`started_at` alone is wall-clock (Unix seconds) so records can be placed on a timeline.
Server-side phases (queue, prefill, decode) come from vLLM's `llm_request` span when
one joined by trace id, else from the per-request metrics vLLM puts in the response when
run with `--enable-per-request-metrics`; `phases_source` says which. Both measure the same
intervals (queue = scheduled - queued, prefill = first token - scheduled, decode = last
token - first token); the response's `time_to_first_token_ms` is that prefill, counted from
scheduling, not the span's TTFT from arrival. docs/metrics.md lists the phases and how they
add up to e2e.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lanewatch.collector.record.itl import MAX_ITL_SAMPLES, ItlStats, bounded_gaps
from lanewatch.collector.record.rules import (
    MAX_CONTENT_CHARS,
    MAX_ID_CHARS,
    MAX_LABEL_CHARS,
    RecordError,
    bad_duration,
    bad_durations,
    clean_attrs,
    clean_text,
)

# envoy: its access log (collect/envoy_log.py); litellm: the LiteLLM proxy's handler (integrations/litellm/)
Source = Literal["probe", "tap", "envoy", "litellm"]
Api = Literal["chat", "completions"]
# Where a record's queue, prefill and decode came from: vLLM's `llm_request` span, or the
# per-request metrics vLLM put in the response (`--enable-per-request-metrics`).
PhasesSource = Literal["span", "response"]

# Milestones and phases as they appear in JSON (`<name>_s`) and in metric labels.
CLIENT_PHASES: tuple[str, ...] = ("dns", "connect", "tls", "send")
SERVER_PHASES: tuple[str, ...] = ("queue", "prefill", "decode")
# The exhaustive, stacked breakdown of e2e, in time order.
BREAKDOWN_PARTS: tuple[str, ...] = (
    "dns",
    "connect",
    "tls",
    "send",
    "queue",
    "prefill",
    "residual",
    "decode",
)
# When no server span joined, queue + prefill + residual collapse into this part.
SERVER_WAIT = "server_wait"
WAIT_PARTS: tuple[str, ...] = ("dns", "connect", "tls", "send", SERVER_WAIT, "decode")
# Prompt and response text: set only with `export.record_content` on (bounded, collector/record/content.py),
# never read by metrics, and left out of a record's JSON while unset.
CONTENT_FIELDS: tuple[str, ...] = ("prompt_text", "response_text")


class ErrorKind(enum.StrEnum):
    """The closed set of ways a request can fail; each becomes a metric label value."""

    DNS = "dns"  # the name did not resolve
    CONNECT_REFUSED = "connect_refused"  # TCP RST / nothing listening
    CONNECT_TIMEOUT = "connect_timeout"  # no TCP handshake within the connect timeout
    CONNECT = "connect"  # any other TCP-level failure (unreachable, reset during connect)
    TLS = "tls"  # TLS handshake failed (untrusted certificate, protocol error)
    SEND = "send"  # the connection broke while the request was written
    HTTP_4XX = "http_4xx"  # a 4xx other than 429
    HTTP_429 = "http_429"  # rate limited or shed
    HTTP_5XX = "http_5xx"  # server error status
    TTFT_TIMEOUT = "ttft_timeout"  # no content chunk within the TTFT timeout
    STALL = "stall"  # a gap between chunks longer than the stall timeout
    TIMEOUT = "timeout"  # the whole request ran past its total timeout
    TRUNCATED = "truncated"  # the stream ended without `data: [DONE]`
    BAD_STREAM = "bad_stream"  # a malformed response: undecodable SSE data, a bad HTTP/1.1 head or framing
    STREAM_ERROR = "stream_error"  # the server sent an error object mid-stream
    CLIENT_DISCONNECT = "client_disconnect"  # the downstream client went away (tap only)
    OTHER = "other"  # anything else; should stay at zero


def error_kind_for_status(status: int) -> ErrorKind | None:
    """Map an HTTP status code to its error kind; None for success."""
    if status == 429:
        return ErrorKind.HTTP_429
    if 400 <= status < 500:
        return ErrorKind.HTTP_4XX
    if status >= 500:
        return ErrorKind.HTTP_5XX
    return None


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """One request, measured end to end. Durations in seconds; None = not measured."""

    source: Source
    target: str
    lane: str
    request_class: str
    model: str
    api: Api = "chat"
    started_at: float = 0.0  # wall clock, Unix seconds
    request_id: str | None = None
    trace_id: str | None = None  # 32 lowercase hex digits (W3C)
    # 16 lowercase hex digits: the span the upstream request was sent under (the parent-id of the
    # traceparent sent), so the join takes only the server span whose parent it is
    span_id: str | None = None
    status: int | None = None  # HTTP status of the response, None if none arrived
    error: ErrorKind | None = None
    # the server's reason for a failure: one line, <= 200 characters, secrets redacted
    # (openai_api/error_detail.py)
    error_message: str | None = None
    # client-side phases (durations); 0 on a reused connection, tls 0 over plain HTTP
    dns_s: float | None = None
    connect_s: float | None = None
    tls_s: float | None = None
    send_s: float | None = None
    # client-side milestones, offsets from the request's start
    ttfb_s: float | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: tuple[float, ...] = ()  # gaps between content chunks: all of them, or an even sample (itl.py)
    itl_stats: ItlStats | None = None  # exact totals of every gap; set only when itl_s is a sample
    prompt_tokens: int | None = None
    # prompt tokens vLLM served from its prefix cache (usage.prompt_tokens_details.cached_tokens): sent
    # only with `--enable-prompt-tokens-details` and only when non-zero, so None is "not reported"
    cached_prompt_tokens: int | None = None
    output_tokens: int | None = None
    tokens_from_usage: bool = False  # False: output_tokens counted from content chunks
    # server-side phases, from vLLM's span (or a server-reported breakdown)
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    phases_source: PhasesSource | None = None
    # vLLM's per-request metrics as the response reported them (seconds; tokens per second)
    response_queue_s: float | None = None  # queue_time_ms
    response_ttft_s: float | None = None  # time_to_first_token_ms: from scheduling, not arrival
    response_generation_s: float | None = None  # generation_time_ms: first to last output token
    response_mean_itl_s: float | None = None  # mean_itl_ms
    response_tokens_per_s: float | None = None  # tokens_per_second, over scheduling to last token
    # The gateway's rescue: a second attempt sent to a faster lane when the first token was late
    # (docs/gateway.md#rescue). `lane` is the lane that served; `late_lane` the one first asked.
    late_lane: str | None = None
    rescue_sent_s: float | None = None  # offset from the request's start: the second attempt left
    # a won rescue's late attempt: its wait to its own first token, or to its cancel without one
    late_wait_s: float | None = None
    # free-form, bounded extras (e.g. served lane for the tap); never prompt text
    attrs: Mapping[str, str] = field(default_factory=dict)
    # opt-in (export.record_content): the prompt and the streamed response, each truncated
    prompt_text: str | None = field(default=None, repr=False)
    response_text: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Refuse numbers no reader could use; repair and bound text (collector/record/rules.py)."""
        # Every record is built through here, at every edge (tap, probe, POST /v1/records, the
        # records file), so nothing past this point meets NaN, a negative time or a lone surrogate.
        # Checked inline, not per field through a helper: the gateway builds one per request.
        for value in _DURATIONS(self):
            if value is not None and not (0.0 <= value < _INF):  # NaN fails every comparison
                raise RecordError(_bad_field(self), "not a finite, non-negative number of seconds")
        # Two C passes over the gaps first (NaN and infinities make the sum non-finite); the
        # per-gap loop that names the bad one runs only when they fail.
        gaps = self.itl_s
        if gaps and not (min(gaps) >= 0.0 and sum(gaps) < _INF) and (i := bad_durations(gaps)) is not None:
            raise RecordError(f"itl_s.{i}", "not a finite, non-negative number of seconds")
        if len(self.itl_s) > MAX_ITL_SAMPLES or self.itl_stats is not None:
            _bound_itl(self)
        if bad_duration(self.started_at):
            raise RecordError("started_at", "not a finite, non-negative Unix time")
        for count in _COUNTS(self):  # a plain loop: a third of any()'s cost over a generator
            if count is not None and count < 0:
                raise RecordError(_negative_count(self), "negative")
        for (name, limit), value in zip(_TEXT_FIELDS, _TEXTS(self), strict=True):
            if value is not None and (len(value) > limit or not value.isascii()):
                object.__setattr__(self, name, clean_text(value, limit))
        if self.attrs and (attrs := clean_attrs(self.attrs)) is not None:
            object.__setattr__(self, "attrs", attrs)

    @property
    def ok(self) -> bool:
        """True when the request completed without an error."""
        return self.error is None

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (e2e - ttft) / (output_tokens - 1)."""
        if self.e2e_s is None or self.ttft_s is None or not self.output_tokens:
            return None
        if self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def own_ttft_s(self) -> float | None:
        """The serving lane's own TTFT: `ttft_s`, less the wait on a late lane before a won rescue."""
        if self.rescue_sent_s is None or self.ttft_s is None or self.late_lane == self.lane:
            return self.ttft_s
        return max(self.ttft_s - self.rescue_sent_s, 0.0)

    @property
    def late_ttft(self) -> tuple[str, float] | None:
        """A won rescue's late lane and its wait (at least its TTFT), which judge that lane; else None."""
        if self.late_lane is None or self.late_wait_s is None or self.late_lane == self.lane:
            return None
        return self.late_lane, self.late_wait_s

    @property
    def itl_totals(self) -> ItlStats | None:
        """Count, sum, min and max of every gap (exact even when itl_s is a sample); None without gaps."""
        if self.itl_stats is not None:
            return self.itl_stats
        gaps = self.itl_s
        return ItlStats(len(gaps), math.fsum(gaps), min(gaps), max(gaps)) if gaps else None

    @property
    def has_server_phases(self) -> bool:
        """True when queue, prefill and decode all joined from a server span."""
        return None not in (self.queue_s, self.prefill_s, self.decode_s)

    def with_server_phases(
        self, queue_s: float, prefill_s: float, decode_s: float, source: PhasesSource = "span"
    ) -> RequestTiming:
        """Return a copy carrying the server-side phases, and where they came from."""
        return dataclasses.replace(
            self, queue_s=queue_s, prefill_s=prefill_s, decode_s=decode_s, phases_source=source
        )

    def without_content(self) -> RequestTiming:
        """The record without prompt and response text (itself when it holds none)."""
        if self.prompt_text is None and self.response_text is None:
            return self
        return dataclasses.replace(self, prompt_text=None, response_text=None)

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON-ready dict (the records.jsonl line format); unset content is left out."""
        # The field names once, not dataclasses.fields() per call: the gateway encodes every record.
        out: dict[str, Any] = {name: getattr(self, name) for name in _FIELD_NAMES}
        out["itl_s"] = list(self.itl_s)
        if self.itl_stats is None:
            del out["itl_stats"]  # every gap is in itl_s: the line reads as it always did
        else:
            out["itl_stats"] = self.itl_stats.to_json()
        out["attrs"] = dict(self.attrs)
        if self.error is not None:
            out["error"] = self.error.value
        for name in CONTENT_FIELDS:
            if out[name] is None:
                del out[name]
        out["tpot_s"] = self.tpot_s
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestTiming:
        """Build a record from `to_json` output; unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        if kwargs.get("error") is not None:
            kwargs["error"] = ErrorKind(kwargs["error"])
        kwargs["itl_s"] = tuple(kwargs.get("itl_s") or ())
        if isinstance(stats := kwargs.get("itl_stats"), Mapping):
            kwargs["itl_stats"] = ItlStats.from_json(stats)
        kwargs["attrs"] = dict(kwargs.get("attrs") or {})
        return cls(**kwargs)


_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RequestTiming))
_DURATION_FIELDS: tuple[str, ...] = tuple(
    f"{name}_s"
    for name in (*CLIENT_PHASES, "ttfb", "ttft", "e2e", *SERVER_PHASES, "rescue_sent", "late_wait")
)
# The numbers every record refuses unless finite (__post_init__): a reader need not look at them again.
FINITE_FIELDS: tuple[str, ...] = (*_DURATION_FIELDS, "started_at", "itl_s")
_TEXT_FIELDS: tuple[tuple[str, int], ...] = (
    *((name, MAX_LABEL_CHARS) for name in ("target", "lane", "request_class", "model", "late_lane")),
    ("request_id", MAX_ID_CHARS),
    ("trace_id", MAX_ID_CHARS),
    ("span_id", MAX_ID_CHARS),
    ("prompt_text", MAX_CONTENT_CHARS),
    ("response_text", MAX_CONTENT_CHARS),
)
_DURATIONS = operator.attrgetter(*_DURATION_FIELDS)
_TEXTS = operator.attrgetter(*(name for name, _ in _TEXT_FIELDS))
_INF = float("inf")


def _bound_itl(record: RequestTiming) -> None:
    """Keep at most MAX_ITL_SAMPLES gaps (totals kept exact), and check given totals against the gaps."""
    stats = record.itl_stats
    if stats is not None and stats.count < len(record.itl_s):
        raise RecordError("itl_stats.count", "fewer than the gaps in itl_s")
    if len(record.itl_s) > MAX_ITL_SAMPLES:
        gaps, totals = bounded_gaps(record.itl_s)
        object.__setattr__(record, "itl_s", gaps)
        if stats is None:
            object.__setattr__(record, "itl_stats", totals)


def _negative_count(record: RequestTiming) -> str:
    """The first token count that is negative."""
    return next(name for name in COUNT_FIELDS if (getattr(record, name) or 0) < 0)


# Every token count of a record is a `*_tokens` field: a new one is checked (here, and against its
# bound in plausible.py) with nothing else to edit.
COUNT_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(RequestTiming) if f.name.endswith("_tokens")
)
_COUNTS = operator.attrgetter(*COUNT_FIELDS)


def _bad_field(record: RequestTiming) -> str:
    """The first duration field that is NaN, infinite or negative."""
    return next(name for name in _DURATION_FIELDS if bad_duration(getattr(record, name)))


def breakdown(r: RequestTiming) -> dict[str, float]:
    """Split e2e into stacked parts, each >= 0, that sum to e2e.

    With server phases: dns, connect, tls, send, queue, prefill, residual, decode
    (decode here is first token to end of stream as the client saw it). Without:
    dns, connect, tls, send, server_wait, decode. Empty when e2e or ttft is missing.
    """
    values = breakdown_values(r)
    if values is None:
        return {}
    names = BREAKDOWN_PARTS if len(values) == len(BREAKDOWN_PARTS) else WAIT_PARTS
    return dict(zip(names, values, strict=True))


def breakdown_values(r: RequestTiming) -> tuple[float, ...] | None:
    """breakdown()'s values alone, in BREAKDOWN_PARTS' order (server phases joined) or WAIT_PARTS'; None
    when e2e or ttft is missing. A summary of many records adds these up without a dict per record."""
    e2e, ttft = r.e2e_s, r.ttft_s
    if e2e is None or ttft is None:
        return None
    # A record's durations are never negative (it refuses them when built), so each part is only
    # capped by what is left of TTFT (the budget), which never goes below 0. Comparisons, not
    # min() calls: a diagnosis splits every record of a file.
    if ttft > e2e:
        ttft = e2e
    budget = ttft
    dns = r.dns_s or 0.0
    if dns > budget:
        dns = budget
    budget -= dns
    connect = r.connect_s or 0.0
    if connect > budget:
        connect = budget
    budget -= connect
    tls = r.tls_s or 0.0
    if tls > budget:
        tls = budget
    budget -= tls
    send = r.send_s or 0.0
    if send > budget:
        send = budget
    budget -= send
    decode = e2e - ttft
    queue, prefill = r.queue_s, r.prefill_s
    if queue is None or prefill is None or r.decode_s is None:
        return dns, connect, tls, send, budget, decode
    # Server clocks run apart from ours: the server's phases are capped by the client-side
    # window between request sent and first token seen.
    if queue > budget:
        queue = budget
    budget -= queue
    if prefill > budget:
        prefill = budget
    return dns, connect, tls, send, queue, prefill, budget - prefill, decode
