"""What a record from another process may claim: times a request can take, a start near its arrival; pure.

A record refuses numbers no reader can use (NaN, infinite, negative: rules.py) wherever it is
built. A record that arrives from outside (`POST /v1/records`, Envoy's access log over OTLP) is
also held here to what a request can be, before it reaches the window or a histogram: one e2e
of 1e297 s would leave a histogram's `_sum` (and every mean taken from it) useless for good, a
TTFT of 5,000 s in an e2e of 1 ms cannot have been measured, more cached prompt tokens than
the prompt held cannot have been served, and a start in the year 2500 is
no request's. `check_plausible` raises `RecordError` naming the field; the ingest edges refuse
that record alone and count it, and take the others of the same batch or call.

It is not part of `RequestTiming.__post_init__`: the gateway and the prober build records of what
they measured on one monotonic clock, and a records file is replayed long after it was written,
so neither a bound nor an arrival time belongs where every record is built.
"""

from __future__ import annotations

import operator
from typing import Final

from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import CLIENT_PHASES, SERVER_PHASES, RequestTiming

__all__ = [
    "BOUNDED_FIELDS",
    "MAX_DURATION_S",
    "MAX_START_AGE_S",
    "MAX_START_AHEAD_S",
    "TTFT_SLACK_S",
    "check_plausible",
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
        raise RecordError(name, f"{value:.6g} s is longer than any request ({MAX_DURATION_S:.0f} s)")
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
                    name, f"{value:.6g} s is later than the end of the request (e2e {e2e:.6g} s)"
                )
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
