"""One lane's records folded into its `LaneStats` as they come: a few numbers kept per record, not the record.

Pure. `add` takes each record once, in order; `stall_keys` then names the records whose slowest
gap reaches the stall limit (a multiple of the lane's ITL median, known only once every record
was seen), and `see_stalls` takes those records again for their gaps; `stats` finishes. So a
file of any size is summarised holding a few floats per record and a bounded sample of gaps.
Each value carries the computation that made it, so a finding shows it.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import operator
import random
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

from lanewatch.collector.diagnose.evidence import LaneStats, Value
from lanewatch.collector.diagnose.thresholds import Thresholds
from lanewatch.collector.record.itl import ItlStats
from lanewatch.collector.record.timing import BREAKDOWN_PARTS, SERVER_WAIT, RequestTiming, breakdown_values
from lanewatch.collector.record.window import fit_fixed_per_token, quantile

__all__ = ["MAX_POOLED_GAPS", "LaneFold"]

# ITL quantiles over more gaps than this come from a seeded, evenly strided sample of at most this
# many (the mean stays exact): sorting 10 million gaps would cost more than the rest of a diagnosis.
MAX_POOLED_GAPS = 1 << 18
# The prefill slope is fitted only over prompts whose sizes span at least this share of their mean.
MIN_PROMPT_SPREAD = 0.25
_JOINED = len(BREAKDOWN_PARTS)
# The breakdown's sums, one slot per part; joined records fill queue..residual, the others server_wait.
_DNS, _CONNECT, _TLS, _SEND, _QUEUE, _PREFILL, _RESIDUAL, _WAIT, _DECODE = range(9)


class LaneFold:
    """The running summary of one lane's records (see the module's docstring for the protocol)."""

    def __init__(self, tpot_slo: float | None, t: Thresholds) -> None:
        self._tpot_slo, self._t = tpot_slo, t
        self.requests = 0
        self.errors: Counter[str] = Counter()
        self._ttft: list[float] = []
        self._tpot: list[float] = []
        self._e2e: list[float] = []
        self._tokens: list[int] = []
        self._class_e2e: dict[str, list[float]] = {}
        self._fit: tuple[list[float], list[float]] = ([], [])  # output tokens, e2e
        self._prefill: tuple[list[float], list[float]] = ([], [])  # prompt tokens, prefill
        self._prompts: tuple[list[int], list[float]] = ([], [])  # prompt tokens, started_at
        # prompt tokens of every record that gave them; cached ones, and how many records said any
        self._prompt_total = self._cached_total = self._cached_records = 0
        self._parts = [0.0] * 9
        self._counted = self._joined = self._waited = 0
        self._joined_first: bool | None = None  # which kind of record came first sets the parts' order
        self._by_target: dict[str, list[tuple[float, float, bool]]] = {}  # started_at, e2e, new connection
        # ITL: every gap counted and summed; a strided sample kept; each record's slowest gap and key
        self._gap_count = 0
        self._gap_sums: list[float] = []
        self._pool: list[float] = []
        self._stride, self._cap = 1, MAX_POOLED_GAPS
        self._phase: Callable[[], float] | None = None  # a seeded Random (2.5 KB) once sampling starts
        self._peaks: tuple[list[float], list[int], list[float]] = ([], [], [])  # peak, key, started_at
        self._deadlines: list[float] = []
        self._due = 0
        self._missed = 0.0
        self._sampled_records = 0  # records that kept only a sample of their gaps
        self._stalls = self._overlapping = 0.0
        self._excess = 0.0

    def add(self, key: int, r: RequestTiming) -> None:
        """Fold one record in; `key` fetches it again for `see_stalls`."""
        self.requests += 1
        e2e = r.e2e_s
        target = self._by_target.get(r.target)
        if target is None:
            target = self._by_target[r.target] = []
        target.append((r.started_at, e2e or 0.0, (r.connect_s or 0.0) > 0))
        if r.error is not None:
            self.errors[r.error.value] += 1
            return
        ttft, tokens, prompt = r.ttft_s, r.output_tokens, r.prompt_tokens
        if ttft is not None:
            self._ttft.append(ttft)
        if e2e is not None:
            self._e2e.append(e2e)
            self._class_e2e.setdefault(r.request_class, []).append(e2e)
            if ttft is not None:
                self._add_parts(r)
                if tokens is not None and tokens >= 2:
                    self._tpot.append((e2e - ttft) / (tokens - 1))
        if tokens is not None:
            self._tokens.append(tokens)
            if tokens and e2e is not None:
                self._fit[0].append(float(tokens))
                self._fit[1].append(e2e)
        if prompt is not None:
            self._prompts[0].append(prompt)
            self._prompts[1].append(r.started_at)
            self._prompt_total += prompt
            if (cached := r.cached_prompt_tokens) is not None:
                self._cached_total += cached
                self._cached_records += 1
            if prompt and r.prefill_s is not None:
                self._prefill[0].append(float(prompt))
                self._prefill[1].append(r.prefill_s)
        if r.itl_s:
            self._add_gaps(key, r)

    def _add_parts(self, r: RequestTiming) -> None:
        values = breakdown_values(r)
        assert values is not None  # e2e and ttft are both known here
        a = self._parts
        if len(values) == _JOINED:
            dns, connect, tls, send, queue, prefill, residual, decode = values
            a[_QUEUE] += queue
            a[_PREFILL] += prefill
            a[_RESIDUAL] += residual
            self._joined += 1
        else:
            dns, connect, tls, send, wait, decode = values
            a[_WAIT] += wait
            self._waited += 1
        a[_DNS] += dns
        a[_CONNECT] += connect
        a[_TLS] += tls
        a[_SEND] += send
        a[_DECODE] += decode
        self._counted += 1
        if self._joined_first is None:
            self._joined_first = len(values) == _JOINED

    def _add_gaps(self, key: int, r: RequestTiming) -> None:
        gaps, totals = r.itl_s, r.itl_stats
        if totals is not None and totals.count > len(gaps):
            self._add_sampled_gaps(key, r, totals)
            return
        n, peak = len(gaps), max(gaps)  # C passes; the gaps are looked at one by one only when needed
        self._gap_count += n
        self._gap_sums.append(sum(gaps))
        stride = self._stride
        if stride == 1:
            self._pool.extend(gaps)
        else:
            self._pool.extend(gaps[int(self._draw() * stride) :: stride])
        self._thin_pool()
        self._add_peak(key, r, peak)
        # Metron's fluidity: token i (after the first) is due i x TPOT SLO after the first one; it
        # arrives at the i-th running sum of gaps, so early tokens bank slack for later ones.
        self._due += n
        slo = self._tpot_slo
        if slo is not None and peak > slo:  # no gap over the SLO: every running sum keeps its deadline
            deadlines = self._deadlines
            if n > len(deadlines):
                deadlines.extend(i * slo for i in range(len(deadlines) + 1, n + 1))
            self._missed += sum(map(operator.gt, itertools.accumulate(gaps), deadlines))

    def _add_sampled_gaps(self, key: int, r: RequestTiming, totals: ItlStats) -> None:
        """A record that kept an even sample of its gaps: counts, sums and peaks from its exact totals.

        Each kept gap stands for `w = count / kept` gaps: it enters the pool w / stride times (a
        running remainder carries the fraction), and in fluidity its running sum and deadline are
        those of the w-th token it stands for, its misses counted w times. An estimate, as the
        sample is: exact when every gap is alike.
        """
        gaps = r.itl_s
        w = totals.count / len(gaps)
        self._sampled_records += 1
        self._gap_count += totals.count
        self._gap_sums.append(totals.sum_s)
        per, at = w / self._stride, self._draw()
        for g in gaps:
            at += per
            copies = int(at)
            if copies:
                self._pool.extend([g] * copies)
                at -= copies
        self._thin_pool()
        self._add_peak(key, r, totals.max_s)
        self._due += totals.count
        slo = self._tpot_slo
        if slo is not None and totals.max_s > slo:
            sums = itertools.accumulate(g * w for g in gaps)
            due = ((i + 1) * w * slo for i in range(len(gaps)))
            self._missed += w * sum(map(operator.gt, sums, due))

    def _draw(self) -> float:
        if self._phase is None:
            self._phase = random.Random(0).random
        return self._phase()

    def _thin_pool(self) -> None:
        while len(self._pool) > self._cap:  # every other one kept: still an even spread, at twice the stride
            self._pool = self._pool[::2]
            self._stride *= 2

    def _add_peak(self, key: int, r: RequestTiming, peak: float) -> None:
        self._peaks[0].append(peak)
        self._peaks[1].append(key)
        self._peaks[2].append(r.started_at)

    def stall_keys(self) -> list[int]:
        """The keys of the records with a gap at the stall limit, for `see_stalls` (in the order added)."""
        stall = self._stall
        return list(stall.keys) if stall is not None else []

    def see_stalls(self, key: int, r: RequestTiming) -> None:
        """Count the stalls of a record `stall_keys` named (any other, or one that changed, is ignored)."""
        stall = self._stall
        if stall is None or stall.keys.get(key) != r.started_at:
            return
        p50, limit, arrivals = stall.p50, stall.limit, stall.arrivals
        gaps, totals = r.itl_s, r.itl_stats
        # a sampled record's kept gap stands for w gaps: its stalls count w times, and the stream
        # before it is w times the kept gaps before it
        w = totals.count / len(gaps) if totals is not None and totals.count > len(gaps) else 1
        # each gap's start (the running sum before it) and the stalls' places, both in C
        stream = gaps if w == 1 else [g * w for g in gaps]
        starts = list(itertools.accumulate(stream, initial=r.started_at + (r.ttft_s or 0.0)))
        for k in itertools.compress(range(len(gaps)), map(limit.__le__, gaps)):
            gap, at = gaps[k], starts[k]
            self._stalls += w
            self._excess += w * (gap - p50)
            i = bisect.bisect_left(arrivals, at - gap)
            self._overlapping += w * (i < len(arrivals) and arrivals[i] <= at + gap)
        del stall.keys[key]

    @functools.cached_property
    def _stall(self) -> _StallLimit | None:
        """What stalls are measured against, worked out once every record is in; None when they cannot be."""
        pool = self._pool
        pool.sort()  # in place: nothing is added after this, and the quantiles sort it again for free
        p50 = quantile(pool, 0.5) if pool else 0.0
        prompts = self._prompts[0]
        if p50 <= 0 or not prompts:
            return None
        limit = self._t.itl_tail_ratio * p50
        prompts = sorted(prompts)
        long_at = quantile(prompts, 0.9)
        arrivals = sorted(
            at for p, at in zip(*self._prompts, strict=True) if p >= long_at and long_at > prompts[0]
        )
        peaks, keys, started = self._peaks
        # each key with its record's start: a record read again that no longer matches is not counted
        stalling = itertools.compress(range(len(peaks)), map(limit.__le__, peaks))
        wanted = {keys[i]: started[i] for i in stalling}
        return _StallLimit(p50, limit, long_at, arrivals, wanted)

    def stats(self) -> LaneStats:
        """The lane's stats, once every record was added and every stall key seen."""
        n_ok = self.requests - sum(self.errors.values())
        src = f"records: {n_ok} ok of {self.requests}"
        quantiles, means = self._latencies(src, (0.5, self._t.slo_quantile))
        parts, server_phases = self._parts_means()
        tokens = sorted(self._tokens)
        share, with_long = self._stall_values()
        return LaneStats(
            requests=self.requests,
            ok_requests=n_ok,
            quantiles=quantiles,
            means=means,
            parts=parts,
            server_phases=server_phases,
            errors=dict(self.errors),
            errors_source=f"records: failed / all ({self.requests}), client_disconnect left out",
            class_e2e_means={c: math.fsum(v) / len(v) for c, v in sorted(self._class_e2e.items())},
            class_source=f"records: mean(e2e_s) per request_class; {src}",
            fit_fixed_share=self._fit_share(src),
            fluidity=self._fluidity(),
            stall_share_of_e2e=share,
            stalls_with_long_prompt=with_long,
            new_connections_after_idle=self._idle_reconnects(),
            output_tokens_p50=Value(quantile(tokens, 0.5), f"records: p50(output_tokens); {src}")
            if tokens
            else None,
            output_tokens=tuple(tokens),
            prefill_per_prompt_token=self._prefill_slope(),
            cached_prompt_share=self._cached_share(),
        )

    def _latencies(self, src: str, qs: tuple[float, ...]) -> tuple[dict[str, Value], dict[str, Value]]:
        quantiles: dict[str, Value] = {}
        means: dict[str, Value] = {}
        sampled = self._stride > 1 or self._sampled_records > 0
        of = f" over a seeded sample of {len(self._pool):,} of {self._gap_count:,} gaps" if sampled else ""
        series = {"ttft": self._ttft, "tpot": self._tpot, "e2e": self._e2e, "itl": self._pool}
        for name, xs in series.items():
            if not xs:
                continue
            xs.sort()  # in place: the fold is done with them
            means[name] = Value(sum(xs) / len(xs), f"records: mean({name}); {src}")  # sorted: small first
            for q in qs:
                label = f"p{round(q * 100)}"
                quantiles[f"{name}_{label}"] = Value(
                    quantile(xs, q), f"records: {label}({name}){of if name == 'itl' else ''}; {src}"
                )
        if sampled:  # the mean from every gap, not the sample
            means["itl"] = Value(math.fsum(self._gap_sums) / self._gap_count, f"records: mean(itl); {src}")
        return quantiles, means

    def _parts_means(self) -> tuple[dict[str, Value], bool]:
        """Each breakdown part's mean over the records with one (timing.breakdown's parts), in its order."""
        counted, a = self._counted, self._parts
        if not counted:
            return {}, False
        sums = {"dns": a[_DNS], "connect": a[_CONNECT], "tls": a[_TLS], "send": a[_SEND]}
        server = {"queue": a[_QUEUE], "prefill": a[_PREFILL], "residual": a[_RESIDUAL]}
        server = server if self._joined else {}
        alone = {SERVER_WAIT: a[_WAIT]} if self._waited else {}
        if self._joined_first:
            sums |= server | {"decode": a[_DECODE]} | alone
        else:
            sums |= alone | {"decode": a[_DECODE]} | server
        # Each part's mean over every record with a breakdown (a part a record lacks counts 0), so
        # the parts add up to mean e2e and each share is of the same requests' TTFT.
        source = f"records: mean breakdown over {counted} ok records"
        return {p: Value(s / counted, source) for p, s in sums.items()}, self._joined * 2 >= counted

    def _stall_values(self) -> tuple[Value | None, Value | None]:
        """Stalls (gaps >= tail ratio x ITL p50): their share of E2E, and the share at long prompts."""
        stall = self._stall
        if stall is None:
            return None, None
        e2e = math.fsum(self._e2e)
        src = f"records: gaps >= {self._t.itl_tail_ratio:g} x ITL p50 ({stall.limit:.4f} s)"
        share = Value(self._excess / e2e, f"{src}: sum(gap - p50) / sum(e2e)") if e2e > 0 else None
        with_long = Value(
            self._overlapping / self._stalls if self._stalls else 0.0,
            f"{src}: share with a prompt >= p90 ({stall.long_at:g} tokens) arriving within a gap of it",
        )
        return share, with_long

    def _fit_share(self, src: str) -> Value | None:
        fit = fit_fixed_per_token(*self._fit)
        if fit is None:
            return None
        share = min(max(fit.fixed_share, 0.0), 1.0)
        return Value(
            share, f"records: least squares e2e = fixed + per_token x output_tokens, fixed / mean(e2e); {src}"
        )

    def _cached_share(self) -> Value | None:
        """Cached over all prompt tokens, once any record reported cached ones.

        vLLM reports `cached_tokens` only with --enable-prompt-tokens-details and only when non-zero:
        with none reported, the flag may be off, so no share is claimed; with some, the records
        without it found nothing cached.
        """
        if not self._cached_records or not self._prompt_total:
            return None
        return Value(
            self._cached_total / self._prompt_total,
            f"records: sum(cached_prompt_tokens) / sum(prompt_tokens), {self._cached_records} reporting",
        )

    def _prefill_slope(self) -> Value | None:
        """Prefill's growth per prompt token, when the prompt sizes spread enough to measure one."""
        sizes, prefill = self._prefill
        # Prompts of one template differ by a few tokens: a slope over so narrow a spread is noise
        # (-0.017 s per token over 2,790-2,795-token prompts on a real vLLM), not a cost per token.
        if not sizes or max(sizes) - min(sizes) < MIN_PROMPT_SPREAD * math.fsum(sizes) / len(sizes):
            return None
        fit = fit_fixed_per_token(sizes, prefill)
        if fit is None:
            return None
        return Value(
            fit.per_token_s, f"records: least squares prefill_s = a + b x prompt_tokens, b (r2 {fit.r2:.2f})"
        )

    def _fluidity(self) -> Value | None:
        if self._tpot_slo is None or not self._due:
            return None
        return Value(
            1.0 - self._missed / self._due,
            f"records: 1 - missed / all per-token deadlines (deadline i x {self._tpot_slo:g} s)",
        )

    def _idle_reconnects(self) -> Value | None:
        """Of the requests after an idle gap longer than the keep-alive, the share on a new connection."""
        keepalive_s = self._t.keepalive_s
        after_idle = new = 0
        for rows in self._by_target.values():
            rows.sort(key=_FIRST)  # stable: requests started at once keep the order they came in
            busy_until = -math.inf
            for started_at, e2e, fresh in rows:
                if started_at - busy_until > keepalive_s and busy_until > -math.inf:
                    after_idle += 1
                    new += fresh
                busy_until = max(busy_until, started_at + e2e)
        if not after_idle:
            return None
        return Value(
            new / after_idle, f"records: new connections / requests after an idle gap > {keepalive_s:g} s"
        )


_FIRST = operator.itemgetter(0)


class _StallLimit(NamedTuple):
    """What stalls are measured against: ITL p50, the limit, the long prompts (their size and
    arrivals), and the records to look at again (key -> started_at, to know a record read again)."""

    p50: float
    limit: float
    long_at: float
    arrivals: list[float]
    keys: dict[int, float]
