"""Request records -> each lane's `LaneStats`: quantiles, phase means, errors, and what only records give.

Pure: the records are passed in (read by the caller with collector/record/files.py). Each value
carries the computation that made it, so a finding shows it. A lane is the lane that served the
request (`lane`): the engine the time was spent in.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from lanewatch.collector.diagnose.evidence import LaneEvidence, LaneStats, ServerSeries, SloTargets, Value
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from lanewatch.collector.record.timing import SERVER_WAIT, RequestTiming
from lanewatch.collector.record.window import fit_fixed_per_token, quantile

__all__ = ["lane_stats", "lanes_from_records"]

LATENCIES = ("ttft", "tpot", "e2e")
# ITL quantiles over more gaps than this come from a seeded random sample of this many (the
# mean stays exact): sorting 5 million gaps would cost more than the rest of a diagnosis.
MAX_POOLED_GAPS = 1 << 18
_STARTED_AT = operator.attrgetter("started_at")
# The prefill slope is fitted only over prompts whose sizes span at least this share of their mean.
MIN_PROMPT_SPREAD = 0.25


def lanes_from_records(
    records: Iterable[RequestTiming],
    slos: Mapping[str, SloTargets] | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    server: Mapping[str, ServerSeries] | None = None,
) -> dict[str, LaneEvidence]:
    """One LaneEvidence per lane the records name."""
    by_lane: dict[str, list[RequestTiming]] = {}
    for r in records:
        by_lane.setdefault(r.lane, []).append(r)
    slos, server = slos or {}, server or {}
    return {
        lane: LaneEvidence(
            lane,
            lane_stats(rs, slos.get(lane, SloTargets()), thresholds),
            server.get(lane, ServerSeries()),
            slos.get(lane, SloTargets()),
        )
        for lane, rs in sorted(by_lane.items())
    }


def _q_name(q: float) -> str:
    return f"p{round(q * 100)}"


def lane_stats(records: Sequence[RequestTiming], slo: SloTargets, t: Thresholds) -> LaneStats:
    """The stats of one lane's records over the window."""
    ok = [r for r in records if r.ok]
    n_ok = len(ok)
    src = f"records: {n_ok} ok of {len(records)}"
    quantiles, means = _latencies(ok, src, (0.5, t.slo_quantile))
    parts, server_phases = _parts(ok, src)
    tokens = sorted(r.output_tokens for r in ok if r.output_tokens is not None)
    peaks = [max(r.itl_s) if r.itl_s else 0.0 for r in ok]  # each record's slowest gap: one C pass
    stall_share, with_long_prompt = _stalls(ok, peaks, quantiles.get("itl_p50"), t)
    return LaneStats(
        requests=len(records),
        ok_requests=n_ok,
        quantiles=quantiles,
        means=means,
        parts=parts,
        server_phases=server_phases,
        errors=dict(Counter(r.error.value for r in records if r.error is not None)),
        errors_source=f"records: failed / all ({len(records)}), client_disconnect left out",
        class_e2e_means=_class_means(ok),
        class_source=f"records: mean(e2e_s) per request_class; {src}",
        fit_fixed_share=_fit_share(ok, src),
        fluidity=_fluidity(ok, peaks, slo.tpot_s),
        stall_share_of_e2e=stall_share,
        stalls_with_long_prompt=with_long_prompt,
        new_connections_after_idle=_idle_reconnects(records, t.keepalive_s),
        output_tokens_p50=Value(quantile(tokens, 0.5), f"records: p50(output_tokens); {src}")
        if tokens
        else None,
        output_tokens=tuple(tokens),
        prefill_per_prompt_token=_prefill_slope(ok),
    )


def _latencies(
    ok: Sequence[RequestTiming], src: str, qs: tuple[float, ...]
) -> tuple[dict[str, Value], dict[str, Value]]:
    quantiles: dict[str, Value] = {}
    means: dict[str, Value] = {}
    gaps, gaps_src = _pooled_gaps(ok)
    series: dict[str, list[float]] = {
        "ttft": sorted(r.ttft_s for r in ok if r.ttft_s is not None),
        "tpot": sorted(v for r in ok if (v := r.tpot_s) is not None),
        "e2e": sorted(r.e2e_s for r in ok if r.e2e_s is not None),
        "itl": gaps,
    }
    for name, xs in series.items():
        if not xs:
            continue
        of = gaps_src if name == "itl" else ""
        means[name] = Value(sum(xs) / len(xs), f"records: mean({name}); {src}")  # sorted: small first
        for q in qs:
            quantiles[f"{name}_{_q_name(q)}"] = Value(
                quantile(xs, q), f"records: {_q_name(q)}({name}){of}; {src}"
            )
    if gaps and gaps_src:  # sampled: the mean from every gap, not the sample
        count = sum(len(r.itl_s) for r in ok)
        means["itl"] = Value(
            math.fsum(map(math.fsum, (r.itl_s for r in ok))) / count, f"records: mean(itl); {src}"
        )
    return quantiles, means


def _pooled_gaps(ok: Sequence[RequestTiming]) -> tuple[list[float], str]:
    """The ITL gaps of the records, sorted: all of them, or a seeded sample past MAX_POOLED_GAPS.

    Extended per record (C loops, not a generator). The sample takes each record's gaps from a
    random phase at one stride, so a stall pattern that repeats with the stride is not missed.
    """
    total = sum(len(r.itl_s) for r in ok)
    gaps: list[float] = []
    if total <= MAX_POOLED_GAPS:
        for r in ok:
            gaps.extend(r.itl_s)
        gaps.sort()
        return gaps, ""
    stride = -(-total // MAX_POOLED_GAPS)
    phase = random.Random(0).randrange
    for r in ok:
        if r.itl_s:
            gaps.extend(r.itl_s[phase(stride) :: stride])
    gaps.sort()
    return gaps, f" over a seeded sample of {len(gaps):,} of {total:,} gaps"


def _parts(ok: Sequence[RequestTiming], src: str) -> tuple[dict[str, Value], bool]:
    """Each breakdown part's mean over the records with one (timing.breakdown's parts, summed inline)."""
    # breakdown() per record builds a dict a file of records would build 100,000 times: the same
    # clamps in the same order here, summed in record order, give the same floats.
    dns = connect = tls = send = queue = prefill = residual = wait = decode = 0.0
    counted = joined = waited = 0
    joined_first: bool | None = None  # which kind of record came first sets the parts' order
    for r in ok:
        e2e, ttft = r.e2e_s, r.ttft_s
        if e2e is None or ttft is None:
            continue
        counted += 1
        ttft = min(max(ttft, 0.0), e2e)
        budget = ttft
        part = min(max(r.dns_s or 0.0, 0.0), budget)
        dns += part
        budget -= part
        part = min(max(r.connect_s or 0.0, 0.0), budget)
        connect += part
        budget -= part
        part = min(max(r.tls_s or 0.0, 0.0), budget)
        tls += part
        budget -= part
        part = min(max(r.send_s or 0.0, 0.0), budget)
        send += part
        budget -= part
        q, p = r.queue_s, r.prefill_s
        if q is not None and p is not None and r.decode_s is not None:
            joined += 1
            part = min(max(q, 0.0), budget)
            queue += part
            budget -= part
            part = min(max(p, 0.0), budget)
            prefill += part
            residual += max(budget - part, 0.0)
        else:
            waited += 1
            wait += max(budget, 0.0)
        if joined_first is None:
            joined_first = bool(joined)
        decode += max(e2e - ttft, 0.0)
    if not counted:
        return {}, False
    sums = {"dns": dns, "connect": connect, "tls": tls, "send": send}
    server = {"queue": queue, "prefill": prefill, "residual": residual} if joined else {}
    alone = {SERVER_WAIT: wait} if waited else {}
    if joined_first:
        sums |= server | {"decode": decode} | alone
    else:
        sums |= alone | {"decode": decode} | server
    # Each part's mean over every record with a breakdown (a part a record lacks counts 0), so
    # the parts add up to mean e2e and each share is of the same requests' TTFT.
    out = {
        p: Value(s / counted, f"records: mean breakdown over {counted} ok records") for p, s in sums.items()
    }
    return out, joined * 2 >= counted


def _class_means(ok: Sequence[RequestTiming]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for r in ok:
        if r.e2e_s is not None:
            sums.setdefault(r.request_class, []).append(r.e2e_s)
    return {c: math.fsum(v) / len(v) for c, v in sorted(sums.items())}


def _fit_share(ok: Sequence[RequestTiming], src: str) -> Value | None:
    pts = [(float(r.output_tokens), r.e2e_s) for r in ok if r.output_tokens and r.e2e_s is not None]
    fit = fit_fixed_per_token([x for x, _ in pts], [y for _, y in pts])
    if fit is None:
        return None
    share = min(max(fit.fixed_share, 0.0), 1.0)
    return Value(
        share, f"records: least squares e2e = fixed + per_token x output_tokens, fixed / mean(e2e); {src}"
    )


def _prefill_slope(ok: Sequence[RequestTiming]) -> Value | None:
    """Prefill's growth per prompt token, when the prompt sizes spread enough to measure one."""
    pts = [(float(r.prompt_tokens), r.prefill_s) for r in ok if r.prompt_tokens and r.prefill_s is not None]
    sizes = [x for x, _ in pts]
    # Prompts of one template differ by a few tokens: a slope over so narrow a spread is noise
    # (-0.017 s per token over 2,790-2,795-token prompts on a real vLLM), not a cost per token.
    if not sizes or max(sizes) - min(sizes) < MIN_PROMPT_SPREAD * math.fsum(sizes) / len(sizes):
        return None
    fit = fit_fixed_per_token(sizes, [y for _, y in pts])
    if fit is None:
        return None
    return Value(
        fit.per_token_s, f"records: least squares prefill_s = a + b x prompt_tokens, b (r2 {fit.r2:.2f})"
    )


def _fluidity(ok: Sequence[RequestTiming], peaks: Sequence[float], tpot_slo: float | None) -> Value | None:
    """Metron's fluidity index over decode tokens: token i is due i x TPOT SLO after the first one."""
    if tpot_slo is None:
        return None
    longest = max((len(r.itl_s) for r in ok), default=0)
    deadlines = [i * tpot_slo for i in range(1, longest + 1)]
    due = missed = 0
    for r, peak in zip(ok, peaks, strict=True):
        # token i (after the first) arrives at the i-th running sum of gaps and is due at i x SLO:
        # early tokens bank slack for later ones. map stops with the gaps; the loop stays in C.
        due += len(r.itl_s)
        if peak > tpot_slo:  # no gap over the SLO: every running sum stays within its deadline
            missed += sum(map(operator.gt, itertools.accumulate(r.itl_s), deadlines))
    if not due:
        return None
    return Value(
        1.0 - missed / due, f"records: 1 - missed / all per-token deadlines (deadline i x {tpot_slo:g} s)"
    )


def _stalls(
    ok: Sequence[RequestTiming], peaks: Sequence[float], itl_p50: Value | None, t: Thresholds
) -> tuple[Value | None, Value | None]:
    """Stalls (gaps >= tail ratio x ITL p50): their share of E2E, and the share at a long-prompt arrival."""
    none: tuple[Value | None, Value | None] = (None, None)
    if itl_p50 is None or itl_p50.value <= 0:
        return none
    limit = t.itl_tail_ratio * itl_p50.value
    prompts = sorted(r.prompt_tokens for r in ok if r.prompt_tokens is not None)
    if not prompts:
        return none
    long_at = quantile(prompts, 0.9)
    arrivals = sorted(r.started_at for r in ok if (r.prompt_tokens or 0) >= long_at and long_at > prompts[0])
    stalls = overlapping = 0
    excess = 0.0
    stalled = limit.__le__
    for r, peak in zip(ok, peaks, strict=True):
        if peak < limit:  # most records never stall: their gaps are never looked at one by one
            continue
        gaps = r.itl_s
        # each gap's start (the running sum before it) and the stalls' places, both in C
        starts = list(itertools.accumulate(gaps, initial=r.started_at + (r.ttft_s or 0.0)))
        for k in itertools.compress(range(len(gaps)), map(stalled, gaps)):
            gap, at = gaps[k], starts[k]
            stalls += 1
            excess += gap - itl_p50.value
            i = bisect.bisect_left(arrivals, at - gap)
            overlapping += i < len(arrivals) and arrivals[i] <= at + gap
    e2e = math.fsum(r.e2e_s for r in ok if r.e2e_s is not None)
    src = f"records: gaps >= {t.itl_tail_ratio:g} x ITL p50 ({limit:.4f} s)"
    share = Value(excess / e2e, f"{src}: sum(gap - p50) / sum(e2e)") if e2e > 0 else None
    with_long = Value(
        overlapping / stalls if stalls else 0.0,
        f"{src}: share with a prompt >= p90 ({long_at:g} tokens) arriving within a gap of it",
    )
    return share, with_long


def _idle_reconnects(records: Sequence[RequestTiming], keepalive_s: float) -> Value | None:
    """Of the requests that followed an idle gap longer than the keep-alive, the share on a new connection."""
    by_target: dict[str, list[RequestTiming]] = {}
    for r in records:
        by_target.setdefault(r.target, []).append(r)
    after_idle = new = 0
    for rs in by_target.values():
        rs.sort(key=_STARTED_AT)
        busy_until = -math.inf
        for r in rs:
            if r.started_at - busy_until > keepalive_s and busy_until > -math.inf:
                after_idle += 1
                new += (r.connect_s or 0.0) > 0
            busy_until = max(busy_until, r.started_at + (r.e2e_s or 0.0))
    if not after_idle:
        return None
    return Value(
        new / after_idle, f"records: new connections / requests after an idle gap > {keepalive_s:g} s"
    )
