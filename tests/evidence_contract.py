"""The fast guard's evidence contract (docs/slo.md, "The evidence contract"), as a pure checker.

Every source that feeds the fast guard (the gateway's tap and progress reports, Envoy's periodic
and end entries, LiteLLM's handler, the prober) must hold its records and progress events to the
same contract, so the guard judges the same request the same way whoever saw it:

1. The TTFT clock starts when the request's body has fully arrived (for a client, the prober: when
   it has fully sent it). A client's slow upload is the client's, never the lane's: it is in no
   `ttft_s`, no `e2e_s` and no in-flight age.
2. Only a streamed request (`"stream": true`) has an observable first token. A non-streamed
   answer's record has `ttft_s` None, and the request yields no progress event at all: it never
   counts toward a TTFT SLO.
3. A record's client-side phases (`dns_s`, `connect_s`, `tls_s`, `send_s`) are the only time before
   the body's end it may hold: `ttft_s` minus them is the wait from the body's end to the first
   token. A source in the request's path (gateway, Envoy, LiteLLM) measures none of them (None),
   so its `ttft_s` is that wait; the prober, the client itself, states them.

Tests call these checks with what they know of one request from outside: how long its client
took to upload the body, and when the upstream sent its first token, measured from the body's
end. Each check returns the breaches found, one line each naming the field; an empty list is a
request whose evidence holds. The signatures are stable: other tests (LiteLLM's) import them.
"""

from __future__ import annotations

from collections.abc import Sequence

from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.record.plausible import TTFT_SLACK_S
from lanewatch.collector.record.timing import CLIENT_PHASES, RequestTiming

__all__ = ["check_evidence", "check_progress", "client_phases_s"]


def client_phases_s(record: RequestTiming) -> float:
    """The record's client-side time before the body's end: dns + connect + tls + send (unset: 0)."""
    return sum(getattr(record, f"{name}_s") or 0.0 for name in CLIENT_PHASES)


def check_evidence(
    record: RequestTiming,
    *,
    streamed: bool,
    upload_s: float,
    upstream_first_token_s: float | None,
    tolerance_s: float,
) -> list[str]:
    """The contract breaches of one finished request's record (empty when it holds).

    `streamed`: the request asked `"stream": true` and the upstream answered with an event stream.
    `upload_s`: seconds the client took from its body's first byte to its last (0 for one write).
    `upstream_first_token_s`: seconds from the body's end to the upstream's first content token, as
    the test's upstream set it (None when none came: a failure, or a non-streamed answer).
    `tolerance_s`: the slack allowed for the hops between the upstream and the source.

    With `upload_s` past the tolerance, `e2e_s` is checked too: the answer must then end within
    `upload_s - tolerance_s` of its first token (send a short answer when you dribble a body).
    """
    breaches: list[str] = []
    ttft, e2e = record.ttft_s, record.e2e_s
    before = client_phases_s(record)
    src = f"{record.source} record"
    if ttft is not None and e2e is not None and ttft > e2e + TTFT_SLACK_S:  # Envoy's whole ms
        breaches.append(f"ttft_s: {src} has ttft_s {ttft:.3f} past its e2e_s {e2e:.3f}")
    if not streamed:
        if ttft is not None:
            breaches.append(
                f"ttft_s: {src} of a non-streamed answer has ttft_s {ttft:.3f}, not null: "
                "its first token is not observable, so it must not count toward a TTFT SLO"
            )
    elif upstream_first_token_s is not None:
        if ttft is None:
            breaches.append(f"ttft_s: {src} of a streamed answer has no ttft_s")
        else:
            breaches.extend(
                _wait_breaches(src, "ttft_s", ttft - before, upload_s, upstream_first_token_s, tolerance_s)
            )
    if (
        e2e is not None
        and upload_s > tolerance_s
        and e2e - before >= upload_s - tolerance_s + _floor(upstream_first_token_s)
    ):
        # A short answer (the docstring asks for one) cannot last the upload past its first token.
        breaches.append(
            f"e2e_s: {src} has e2e_s {e2e:.3f} beyond its client phases {before:.3f}: "
            f"it holds the client's {upload_s:.3f} s upload"
        )
    return breaches


def check_progress(
    events: Sequence[Progress],
    *,
    streamed: bool,
    upload_s: float,
    upstream_first_token_s: float | None,
    tolerance_s: float,
) -> list[str]:
    """The contract breaches of the progress events one source reported for one request (empty when
    they hold). `events`: every event of that request, in the order reported; the other arguments
    as for `check_evidence`.

    A non-streamed request yields no event; a waiting request's age never holds the upload (nor
    passes the upstream's first token by more than the tolerance); a streamed request whose first
    token came yields a first-token event whose age is that token's wait from the body's end.
    """
    breaches: list[str] = []
    if not streamed:
        if events:
            breaches.append(
                f"progress: {len(events)} event(s) for a non-streamed request (first: {_show(events[0])}): "
                "it must yield none, as its first token is not observable"
            )
        return breaches
    ceiling = None if upstream_first_token_s is None else upstream_first_token_s + tolerance_s
    for event in events:
        if event.first_token:
            continue
        if ceiling is not None and event.age_s > ceiling:
            why = "holds the client's upload" if upload_s > tolerance_s else "runs past the first token"
            breaches.append(
                f"progress: waiting age {event.age_s:.3f} {why} (first token at {upstream_first_token_s:.3f})"
            )
        elif (
            upload_s > tolerance_s
            and event.age_s >= upload_s - tolerance_s
            and upstream_first_token_s is None
        ):
            breaches.append(
                f"progress: waiting age {event.age_s:.3f} holds the client's {upload_s:.3f} s upload"
            )
    firsts = [e for e in events if e.first_token]
    if upstream_first_token_s is not None and not firsts:
        breaches.append("progress: no first-token event for a streamed request whose first token came")
    for event in firsts:
        breaches.extend(
            _wait_breaches(
                "progress", "first-token age", event.age_s, upload_s, upstream_first_token_s, tolerance_s
            )
        )
    return breaches


def _wait_breaches(
    src: str, name: str, wait: float, upload_s: float, first_s: float | None, tolerance_s: float
) -> list[str]:
    """The breaches of one measured wait from the body's end to the first token."""
    if first_s is None:
        return []
    if upload_s > tolerance_s and wait >= first_s + upload_s - tolerance_s:
        return [
            f"{name}: {src}'s wait {wait:.3f} holds the client's {upload_s:.3f} s upload "
            f"(first token at {first_s:.3f})"
        ]
    if wait > first_s + tolerance_s:
        return [f"{name}: {src}'s wait {wait:.3f} is later than the upstream's first token at {first_s:.3f}"]
    if wait < first_s - tolerance_s:
        return [
            f"{name}: {src}'s wait {wait:.3f} is earlier than the upstream's first token at {first_s:.3f}"
        ]
    return []


def _floor(first_s: float | None) -> float:
    return first_s or 0.0


def _show(event: Progress) -> str:
    kind = "first token" if event.first_token else "waiting"
    return f"{kind} {event.age_s:.3f} s on lane {event.lane}"
