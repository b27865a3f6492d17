"""What a record from another process may claim: times a request can take, a start near its arrival; pure.

A record refuses numbers no reader can use (NaN, infinite, negative: rules.py) wherever it is
built. A record that arrives from outside (`POST /v1/records`, Envoy's access log over OTLP) is
also held here to what a request can be, before it reaches the window or a histogram: one e2e
of 1e297 s would leave a histogram's `_sum` (and every mean taken from it) useless for good, a
TTFT of 5,000 s in an e2e of 1 ms cannot have been measured, more cached prompt tokens than
the prompt held cannot have been served, and a start in the year 2500 is
no request's. Every other number is held too: a token count past MAX_TOKENS (one count of
2**63 - 1 left `lanewatch_tokens_total` at 9.2e18 for good, and one of 10**400 cannot even be
added to a float counter), an HTTP status that is not three digits, vLLM's per-request metrics
past the duration bound or negative, gap totals without a gap to spread them over.
`check_plausible` raises `RecordError` naming the field; the ingest edges refuse that record
alone and count it, and take the others of the same batch or call.

It is not part of `RequestTiming.__post_init__`: the gateway and the prober build records of what
they measured on one monotonic clock, and a records file is replayed long after it was written,
so neither a bound nor an arrival time belongs where every record is built.
"""

from __future__ import annotations

import math
import operator
from typing import Final

from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import CLIENT_PHASES, COUNT_FIELDS, SERVER_PHASES, RequestTiming

__all__ = [
    "BOUNDED_FIELDS",
    "COUNT_FIELDS",
    "MAX_DURATION_S",
    "MAX_START_AGE_S",
    "MAX_START_AHEAD_S",
    "MAX_STATUS",
    "MAX_TOKENS",
    "TTFT_SLACK_S",
    "check_plausible",
    "count_problem",
]

# No request lasts longer. The project bounds no request's whole length (Envoy's routes set
# `timeout: 0s`; the gateway's read_timeout_s, 300 s, is the longest wait for the next bytes, not a
# total), so the bound is what a stream can take: 128k output tokens at a slow 10 tokens/s is
# 3.6 h. Six hours keeps every real request and refuses values that would swamp a histogram's sum.
MAX_DURATION_S: Final = 6 * 3600.0
# TTFT and TTFB may pass e2e by this much: Envoy logs each in whole milliseconds when its `_ms`
# operators are used, so each of the two values may be a millisecond off.
TTFT_SLACK_S: Final = 0.002
# A record's start may lie this far after its arrival: the sender's clock running ahead of ours
# (NTP keeps hosts within a second; an unsynced one drifts minutes).
MAX_START_AHEAD_S: Final = 600.0
# And this far before it: the request's own length (at most MAX_DURATION_S) plus the time a sender
# held it while the collector was away (the gateway's shipper queues 20,000 records, retrying).
MAX_START_AGE_S: Final = 24 * 3600.0
# The durations held to MAX_DURATION_S, beside every inter-token gap and their sum.
BOUNDED_FIELDS: Final = tuple(f"{name}_s" for name in (*CLIENT_PHASES, "ttfb", "ttft", "e2e", *SERVER_PHASES))
_BOUNDED: Final = operator.attrgetter(*BOUNDED_FIELDS)
# No one request's token count is larger. The collector does not know its lanes' models' context
# lengths (nothing it reads reports them), so the bound is one ceiling for every lane. The largest
# context windows served today are about 10M tokens, and one request's usage may add up several
# sequences: `n` choices each up to the context (completion_tokens is their sum), or a completions
# request's list of prompts (prompt_tokens is their sum). Ten times the largest context leaves room
# for those and for larger contexts, while one record at the bound still moves a float counter by
# no more than 1e8: 90 million of them before it stops counting single tokens (2**53), where one
# record of 2**63 - 1 did it at once. Also far below int64, so every count fits every reader.
MAX_TOKENS: Final = 100_000_000
_COUNTS: Final = operator.attrgetter(*COUNT_FIELDS)
# HTTP's status-code is three digits (RFC 9110 section 15): the gateway records whatever three digits
# its upstream's status line held, so any of them passes; Envoy's 0 (no response) is None by then.
MAX_STATUS: Final = 999
# vLLM's per-request metrics (the response's `metrics`): durations held as the record's own, and a
# throughput that only has to be a number (a rate over a tiny interval may be large; nothing sums it).
_RESPONSE_DURATIONS: Final = (
    "response_queue_s",
    "response_ttft_s",
    "response_generation_s",
    "response_mean_itl_s",
)
_RESPONSE: Final = operator.attrgetter(*_RESPONSE_DURATIONS, "response_tokens_per_s")
_INF: Final = float("inf")


def count_problem(value: int | None) -> str | None:
    """Why a token count is none one request could have (negative, past MAX_TOKENS), or None."""
    if value is None or 0 <= value <= MAX_TOKENS:
        return None
    if value < 0:
        return "negative"
    return f"more tokens than one request can hold (at most {MAX_TOKENS:,})"


def check_plausible(record: RequestTiming, received_at: float | None = None) -> None:
    """RecordError naming the first field no real request could have: a duration past MAX_DURATION_S,
    a TTFT or TTFB past e2e (by more than TTFT_SLACK_S), or, given the arrival's wall-clock time,
    a start outside [received_at - MAX_START_AGE_S, received_at + MAX_START_AHEAD_S] (a start of
    0 is "not known" and passes)."""
    # One C-speed pass over the durations and the gaps; the loop that names the field runs only
    # when it fails (every record that arrives is checked here).
    values = _BOUNDED(record)
    if max([v for v in values if v is not None], default=0.0) > MAX_DURATION_S:
        name, value = next(
            (n, v)
            for n, v in zip(BOUNDED_FIELDS, values, strict=True)
            if v is not None and v > MAX_DURATION_S
        )
        raise RecordError(name, f"{_shown(value)} s is longer than any request ({MAX_DURATION_S:.0f} s)")
    stats, gaps = record.itl_stats, record.itl_s
    if (stats.sum_s if stats is not None else sum(gaps)) > MAX_DURATION_S:
        longest = max(stats.max_s if stats is not None else 0.0, max(gaps, default=0.0))
        name = "itl_s" if longest > MAX_DURATION_S else "itl_stats.sum_s"
        raise RecordError(name, f"gaps longer than any request ({MAX_DURATION_S:.0f} s)")
    e2e = record.e2e_s
    if e2e is not None:
        for name in ("ttft_s", "ttfb_s"):
            value = getattr(record, name)
            if value is not None and value > e2e + TTFT_SLACK_S:
                raise RecordError(
                    name, f"{_shown(value)} s is later than the end of the request (e2e {_shown(e2e)} s)"
                )
    _check_numbers(record)
    cached, prompt = record.cached_prompt_tokens, record.prompt_tokens
    if cached is not None and prompt is not None and cached > prompt:
        raise RecordError("cached_prompt_tokens", f"{cached} cached of a prompt of {prompt} tokens")
    start = record.started_at
    if received_at is None or start == 0.0:
        return
    if start > received_at + MAX_START_AHEAD_S:
        raise RecordError("started_at", f"{start - received_at:.0f} s after the record arrived")
    if start < received_at - MAX_START_AGE_S:
        raise RecordError("started_at", f"{received_at - start:.0f} s before the record arrived")


def _check_numbers(record: RequestTiming) -> None:
    """RecordError naming the first count, status or response metric no request could have."""
    counts = _COUNTS(record)
    if max([c for c in counts if c is not None], default=0) > MAX_TOKENS:
        name, value = next((n, c) for n, c in zip(COUNT_FIELDS, counts, strict=True) if count_problem(c))
        raise RecordError(name, count_problem(value) or "")
    stats = record.itl_stats
    if stats is not None:
        # a gap per content chunk, and a chunk carries at least one token
        if stats.count > MAX_TOKENS:
            raise RecordError(
                "itl_stats.count", f"more gaps than one request can have (at most {MAX_TOKENS:,})"
            )
        if stats.count and not record.itl_s:  # totals with no sample to spread over the buckets
            raise RecordError("itl_stats.count", "gaps counted, but itl_s holds none of them")
    status = record.status
    if status is not None and not 0 <= status <= MAX_STATUS:
        raise RecordError("status", f"not an HTTP status (three digits): {_shown(status)}")
    response = _RESPONSE(record)
    if response.count(None) == len(response):
        return
    for name, value in zip(_RESPONSE_DURATIONS, response, strict=False):
        if value is not None and not 0.0 <= value <= MAX_DURATION_S:  # NaN fails every comparison
            raise RecordError(
                name, f"{_shown(value)} s is no duration of a request (0 to {MAX_DURATION_S:.0f} s)"
            )
    rate = response[-1]
    if rate is not None and not 0.0 <= rate < _INF:
        raise RecordError("response_tokens_per_s", f"{_shown(rate)} is not a finite, non-negative rate")


def _shown(value: float) -> str:
    """A number for a message: six significant digits; an int too large for a float by its magnitude."""
    if isinstance(value, int) and not -_EXACT < value < _EXACT:
        # neither float() nor str() takes every int (over 1e308, over 4,300 digits)
        return f"{'-' if value < 0 else ''}~1e{int(math.log10(abs(value)))}"
    return f"{value:.6g}"


_EXACT: Final = 2**53  # the ints a float holds exactly
