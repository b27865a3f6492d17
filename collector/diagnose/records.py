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
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from lanewatch.collector.diagnose.evidence import LaneEvidence, LaneStats, ServerSeries, SloTargets, Value
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from lanewatch.collector.record.timing import RequestTiming, breakdown
from lanewatch.collector.record.window import fit_fixed_per_token, quantile

__all__ = ["lane_stats", "lanes_from_records"]

LATENCIES = ("ttft", "tpot", "e2e")


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
    stall_share, with_long_prompt = _stalls(ok, quantiles.get("itl_p50"), t)
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
        fluidity=_fluidity(ok, slo.tpot_s),
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
    series: dict[str, list[float]] = {
        "ttft": sorted(r.ttft_s for r in ok if r.ttft_s is not None),
        "tpot": sorted(v for r in ok if (v := r.tpot_s) is not None),
        "e2e": sorted(r.e2e_s for r in ok if r.e2e_s is not None),
        "itl": _pooled_gaps(ok),
    }
    for name, xs in series.items():
        if not xs:
            continue
        means[name] = Value(sum(xs) / len(xs), f"records: mean({name}); {src}")  # sorted: small first
        for q in qs:
            quantiles[f"{name}_{_q_name(q)}"] = Value(
                quantile(xs, q), f"records: {_q_name(q)}({name}); {src}"
            )
    return quantiles, means


def _pooled_gaps(ok: Sequence[RequestTiming]) -> list[float]:
    """Every ITL gap of the records, sorted (extended per record: C loops, not a generator)."""
    gaps: list[float] = []
    for r in ok:
        gaps.extend(r.itl_s)
    gaps.sort()
    return gaps


def _parts(ok: Sequence[RequestTiming], src: str) -> tuple[dict[str, Value], bool]:
    sums: dict[str, float] = {}
    counted = 0
    joined = 0
    for r in ok:
        parts = breakdown(r)
        if not parts:
            continue
        counted += 1
        joined += r.has_server_phases
        for part, value in parts.items():
            sums[part] = sums.get(part, 0.0) + value
    if not counted:
        return {}, False
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
    pts = [(float(r.prompt_tokens), r.prefill_s) for r in ok if r.prompt_tokens and r.prefill_s is not None]
    fit = fit_fixed_per_token([x for x, _ in pts], [y for _, y in pts])
    if fit is None:
        return None
    return Value(
        fit.per_token_s, f"records: least squares prefill_s = a + b x prompt_tokens, b (r2 {fit.r2:.2f})"
    )


def _fluidity(ok: Sequence[RequestTiming], tpot_slo: float | None) -> Value | None:
    """Metron's fluidity index over decode tokens: token i is due i x TPOT SLO after the first one."""
    if tpot_slo is None:
        return None
    longest = max((len(r.itl_s) for r in ok), default=0)
    deadlines = [i * tpot_slo for i in range(1, longest + 1)]
    due = missed = 0
    for r in ok:
        # token i (after the first) arrives at the i-th running sum of gaps and is due at i x SLO:
        # early tokens bank slack for later ones. map stops with the gaps; the loop stays in C.
        due += len(r.itl_s)
        missed += sum(map(operator.gt, itertools.accumulate(r.itl_s), deadlines))
    if not due:
        return None
    return Value(
        1.0 - missed / due, f"records: 1 - missed / all per-token deadlines (deadline i x {tpot_slo:g} s)"
    )


def _stalls(
    ok: Sequence[RequestTiming], itl_p50: Value | None, t: Thresholds
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
    for r in ok:
        if not r.itl_s or max(r.itl_s) < limit:  # most records never stall: skip their gaps in C
            continue
        at = r.started_at + (r.ttft_s or 0.0)
        for gap in r.itl_s:
            if gap >= limit:
                stalls += 1
                excess += gap - itl_p50.value
                i = bisect.bisect_left(arrivals, at - gap)
                overlapping += i < len(arrivals) and arrivals[i] <= at + gap
            at += gap
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
        rs.sort(key=lambda r: r.started_at)
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
