"""vLLM's /metrics, scraped per target: parse → snapshot → delta → windowed quantiles.

Everything but `scrape_once` and `run_scrape_loop` is pure. A `ServerSnapshot` holds one
scrape's cumulative values (summed over vLLM's `engine`/`model_name` label sets, older
names mapped to current ones through the rename table in exporters/names.py) and which of
the families lanewatch reads the page had; `ServerWindow` turns consecutive snapshots into reset-aware
deltas and answers quantiles from the buckets (Prometheus' `histogram_quantile`
semantics) and ratios over the last `window_s` seconds. vLLM's queue/prefill/decode
buckets start at 0.3 s, so for a fast lane these serve trends; exact per-request phases
come from the spans (otlp.py).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lanewatch.collector.collect.exposition import parse_samples
from lanewatch.collector.record.evidence import ServerStats
from lanewatch.collector.record.window import QUANTILES
from lanewatch.exporters import names

if TYPE_CHECKING:
    import httpx

INF = math.inf

# Server-side phase (label value) → the vLLM histogram it comes from.
PHASE_HISTOGRAMS: Mapping[str, str] = {
    "queue": names.VLLM_REQUEST_QUEUE_TIME_SECONDS,
    "prefill": names.VLLM_REQUEST_PREFILL_TIME_SECONDS,
    "decode": names.VLLM_REQUEST_DECODE_TIME_SECONDS,
    "ttft": names.VLLM_TIME_TO_FIRST_TOKEN_SECONDS,
    "itl": names.VLLM_INTER_TOKEN_LATENCY_SECONDS,
    "tpot": names.VLLM_REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS,
    "e2e": names.VLLM_E2E_REQUEST_LATENCY_SECONDS,
}
# Gauges kept, and how label sets (engines) combine: counts add up, a usage ratio takes the worst.
GAUGES: Mapping[str, Callable[[Iterable[float]], float]] = {
    names.VLLM_NUM_REQUESTS_RUNNING: math.fsum,
    names.VLLM_NUM_REQUESTS_WAITING: math.fsum,
    names.VLLM_KV_CACHE_USAGE_PERC: max,
    names.VLLM_LEGACY_SPEC_DECODE_DRAFT_ACCEPTANCE_RATE: max,
}
COUNTERS: frozenset[str] = frozenset(
    {
        names.VLLM_PREFIX_CACHE_QUERIES_TOTAL,
        names.VLLM_PREFIX_CACHE_HITS_TOTAL,
        names.VLLM_NUM_PREEMPTIONS_TOTAL,
        names.VLLM_SPEC_DECODE_NUM_DRAFT_TOKENS_TOTAL,
        names.VLLM_SPEC_DECODE_NUM_ACCEPTED_TOKENS_TOTAL,
    }
)
_HISTOGRAMS = frozenset(PHASE_HISTOGRAMS.values())
_HIST_SUFFIXES = ("_bucket", "_sum", "_count")


@dataclass(frozen=True, slots=True)
class Buckets:
    """A classic histogram: cumulative counts at ascending upper bounds, the last +Inf."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    sum: float = 0.0

    @property
    def count(self) -> float:
        """Observations in the histogram (the +Inf bucket)."""
        return self.cumulative[-1] if self.cumulative else 0.0


def bucket_quantile(q: float, h: Buckets) -> float | None:
    """The q-quantile estimated from buckets as Prometheus' histogram_quantile does; None if empty."""
    if not h.bounds or h.count <= 0 or h.bounds[-1] != INF or len(h.bounds) < 2:
        return None
    rank = q * h.count
    i = bisect.bisect_left(h.cumulative, rank)
    i = min(i, len(h.bounds) - 1)
    if h.bounds[i] == INF:
        return h.bounds[-2]  # in the +Inf bucket: the highest finite bound, as Prometheus answers
    upper = h.bounds[i]
    if i == 0 and upper <= 0:
        return upper
    lower = h.bounds[i - 1] if i > 0 else 0.0
    below = h.cumulative[i - 1] if i > 0 else 0.0
    in_bucket = h.cumulative[i] - below
    if in_bucket <= 0:
        return upper
    return lower + (upper - lower) * (rank - below) / in_bucket


def bucket_index(h_bounds: Sequence[float], value: float) -> int:
    """Index of the bucket (upper bound ≥ value) a value falls in."""
    return bisect.bisect_left(h_bounds, value)


def buckets_delta(new: Buckets, old: Buckets | None) -> Buckets:
    """What was observed between two scrapes; after a counter reset (or new bounds), all of `new`."""
    if old is None or old.bounds != new.bounds:
        return new
    diff = tuple(n - o for n, o in zip(new.cumulative, old.cumulative, strict=True))
    if any(d < 0 for d in diff):
        return new
    return Buckets(new.bounds, diff, new.sum - old.sum)


def buckets_add(a: Buckets, b: Buckets) -> Buckets:
    """Two histograms with the same bounds, added."""
    return Buckets(
        a.bounds, tuple(x + y for x, y in zip(a.cumulative, b.cumulative, strict=True)), a.sum + b.sum
    )


def counter_delta(new: float, old: float | None) -> float:
    """Increase of a counter between scrapes; after a reset, the new value."""
    if old is None:
        return 0.0
    return new - old if new >= old else new


@dataclass(frozen=True, slots=True)
class ServerSnapshot:
    """One scrape of one target: cumulative vLLM values, or why the scrape failed."""

    target: str
    lane: str
    at: float  # monotonic seconds when the scrape finished
    duration_s: float
    error: str | None = None  # None: the scrape succeeded (up)
    gauges: Mapping[str, float] = field(default_factory=dict)
    counters: Mapping[str, float] = field(default_factory=dict)
    histograms: Mapping[str, Buckets] = field(default_factory=dict)
    # Families lanewatch reads that the page had (current names), and the older names it read them by.
    families: frozenset[str] = frozenset()
    legacy_names: frozenset[str] = frozenset()

    @property
    def up(self) -> bool:
        """True when the scrape fetched and parsed."""
        return self.error is None


_LabelKey = tuple[tuple[str, str], ...]  # a histogram's labels but `le`


class _Parsed:
    """Accumulates samples of one exposition, keyed by canonical (V1) name."""

    def __init__(self) -> None:
        self.gauges: dict[str, list[float]] = {}
        self.counters: dict[str, float] = {}
        self.buckets: dict[str, dict[_LabelKey, dict[float, float]]] = {}
        self.sums: dict[str, float] = {}

    def add(self, name: str, labels: Mapping[str, str], value: float) -> None:
        if name in GAUGES:
            self.gauges.setdefault(name, []).append(value)
        elif name in COUNTERS:
            self.counters[name] = self.counters.get(name, 0.0) + value
        elif name.endswith("_bucket") and name[: -len("_bucket")] in _HISTOGRAMS:
            key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
            per_set = self.buckets.setdefault(name[: -len("_bucket")], {}).setdefault(key, {})
            per_set[float(labels["le"])] = value
        elif name.endswith("_sum") and name[: -len("_sum")] in _HISTOGRAMS:
            base = name[: -len("_sum")]
            self.sums[base] = self.sums.get(base, 0.0) + value


_LEGACY_PREFIXES = tuple(names.VLLM_LEGACY_ALIASES)


def canonical_name(sample_name: str) -> tuple[str, bool]:
    """A sample name in V1 spelling, and whether it was a legacy (V0) name."""
    if not sample_name.startswith(_LEGACY_PREFIXES):
        return sample_name, False
    for old, new in names.VLLM_LEGACY_ALIASES.items():
        if sample_name == old:
            return new, True
        if sample_name.startswith(old) and sample_name[len(old) :] in _HIST_SUFFIXES:
            return new + sample_name[len(old) :], True
    return sample_name, False


_READ = frozenset(names.VLLM_READ_FAMILIES)
_WANTED = tuple(sorted({*_HISTOGRAMS, *GAUGES, *COUNTERS, *_READ, *names.VLLM_LEGACY_ALIASES}))


def missing_families(present: Iterable[str]) -> tuple[str, ...]:
    """The families lanewatch reads that a page lacked (features such as speculative decoding aside)."""
    have = set(present)
    return tuple(
        f for f in names.VLLM_READ_FAMILIES if f not in have and f not in names.VLLM_OPTIONAL_FAMILIES
    )


@functools.lru_cache(maxsize=4096)  # called per sample; a page repeats a few hundred names
def family_of(sample_name: str) -> str:
    """The family a sample belongs to: a histogram's name without _bucket/_sum/_count."""
    for suffix in _HIST_SUFFIXES:
        base = sample_name.removesuffix(suffix)
        if base != sample_name and base in _HISTOGRAMS:
            return base
    return sample_name


CHUNK_LINES = 64  # lines per parser call (~3-5 µs a line): a chunk holds the loop a fraction of a ms


def relevant_chunks(text: str) -> list[str]:
    """The sample lines lanewatch reads (comments and other metrics dropped), in small chunks.

    Without TYPE lines every sample parses under its own name, which is all `_Parsed` needs;
    dropping the rest first cuts the parse cost, and chunks let a caller yield between them.
    """
    lines = [line for line in text.splitlines() if line.startswith(_WANTED)]
    return ["\n".join(lines[i : i + CHUNK_LINES]) + "\n" for i in range(0, len(lines), CHUNK_LINES)]


class MetricsParser:
    """Parses a /metrics page chunk by chunk; the first bad chunk makes it a failed parse."""

    def __init__(self) -> None:
        self._current, self._legacy = _Parsed(), _Parsed()
        self._samples = 0
        self.families: set[str] = set()  # families lanewatch reads, seen under their current names
        self.legacy_names: set[str] = set()  # older names of families lanewatch reads, seen
        self.error: str | None = None

    def feed(self, chunk: str) -> None:
        """Parse one chunk of sample lines (from `relevant_chunks`)."""
        if self.error is not None:
            return
        try:
            for sample_name, labels, value in parse_samples(chunk.splitlines()):
                name, is_legacy = canonical_name(sample_name)
                read = family_of(name)
                if read in _READ and not is_legacy:
                    self.families.add(read)
                elif read in _READ:
                    self.legacy_names.add(sample_name.removesuffix(name[len(read) :]))
                (self._legacy if is_legacy else self._current).add(name, labels, value)
                self._samples += 1
        except (ValueError, KeyError, IndexError, TypeError) as exc:  # the parser raises several
            self.error = f"unparsable /metrics: {exc}"

    def result(self) -> tuple[dict[str, float], dict[str, float], dict[str, Buckets]]:
        """Gauges, counters and histograms by V1 name; ValueError for a bad page or one without vLLM."""
        if self.error is not None:
            raise ValueError(self.error)
        if self._samples == 0:
            raise ValueError("no vLLM metrics on the page")
        current, legacy = self._current, self._legacy
        gauges = {n: GAUGES[n](v) for n, v in (legacy.gauges | current.gauges).items()}
        counters = legacy.counters | current.counters  # a V1 name wins over its V0 alias
        histograms = {n: _combine(sets, legacy.sums.get(n, 0.0)) for n, sets in legacy.buckets.items()}
        histograms |= {n: _combine(sets, current.sums.get(n, 0.0)) for n, sets in current.buckets.items()}
        return gauges, counters, histograms

    def snapshot(self, target: str, lane: str, at: float, duration_s: float) -> ServerSnapshot:
        """The parsed page as a snapshot (a failed one when the page was bad)."""
        try:
            gauges, counters, histograms = self.result()
        except ValueError as exc:
            return ServerSnapshot(target, lane, at, duration_s, error=f"parse: {exc}")
        return ServerSnapshot(
            target,
            lane,
            at,
            duration_s,
            None,
            gauges,
            counters,
            histograms,
            frozenset(self.families | {names.VLLM_LEGACY_ALIASES[o] for o in self.legacy_names}),
            # An older name beside its current one (0.9 and 0.10 expose both) is not read.
            frozenset(o for o in self.legacy_names if names.VLLM_LEGACY_ALIASES[o] not in self.families),
        )


def parse_metrics(text: str) -> tuple[dict[str, float], dict[str, float], dict[str, Buckets]]:
    """Gauges, counters and histograms lanewatch reads from a /metrics page; ValueError if unusable."""
    parser = MetricsParser()
    for chunk in relevant_chunks(text):
        parser.feed(chunk)
    return parser.result()


def _combine(sets: Mapping[_LabelKey, Mapping[float, float]], total: float) -> Buckets:
    """Label sets of one histogram summed bucket by bucket (over the union of their bounds)."""
    bounds = sorted({b for per_set in sets.values() for b in per_set} | {INF})
    cumulative = [0.0] * len(bounds)
    for per_set in sets.values():
        own = sorted(per_set.items())
        j, last = 0, 0.0
        for i, bound in enumerate(bounds):
            while j < len(own) and own[j][0] <= bound:
                last = own[j][1]
                j += 1
            cumulative[i] += last  # a cumulative count holds until the set's next bound
    return Buckets(tuple(bounds), tuple(cumulative), total)


def snapshot_from_text(target: str, lane: str, text: str, at: float, duration_s: float) -> ServerSnapshot:
    """A snapshot from a /metrics page; a page that does not parse gives a failed snapshot."""
    parser = MetricsParser()
    for chunk in relevant_chunks(text):
        parser.feed(chunk)
    return parser.snapshot(target, lane, at, duration_s)


@dataclass(frozen=True, slots=True)
class _Delta:
    at: float
    histograms: Mapping[str, Buckets]
    counters: Mapping[str, float]


class ServerWindow:
    """One target's scrapes, as deltas over the last `window_s` seconds; time passed in."""

    def __init__(self, target: str, lane: str, window_s: float = 300.0) -> None:
        self.target, self.lane, self.window_s = target, lane, window_s
        self._last_up: ServerSnapshot | None = None
        self._latest: ServerSnapshot | None = None
        self._deltas: deque[_Delta] = deque()
        self._errors = 0
        self._preemptions = 0.0

    def add(self, snap: ServerSnapshot) -> None:
        """Take a scrape: a failed one counts an error; a good one adds its delta from the last good one."""
        self._latest = snap
        if not snap.up:
            self._errors += 1
            return
        prev = self._last_up
        if prev is not None:
            hists = {n: buckets_delta(h, prev.histograms.get(n)) for n, h in snap.histograms.items()}
            counters = {n: counter_delta(v, prev.counters.get(n)) for n, v in snap.counters.items()}
            self._deltas.append(_Delta(snap.at, hists, counters))
            self._preemptions += counters.get(names.VLLM_NUM_PREEMPTIONS_TOTAL, 0.0)
        self._last_up = snap

    def stats(self, now: float) -> ServerStats:
        """Quantiles, ratios and gauges over the window ending at `now`."""
        horizon = now - self.window_s
        while self._deltas and self._deltas[0].at < horizon:
            self._deltas.popleft()
        latest = self._latest
        up = latest is not None and latest.up
        quantiles = {}
        for phase, metric in PHASE_HISTOGRAMS.items():
            h = self.window_histogram(metric)
            qs = {q: v for q in QUANTILES if h is not None and (v := bucket_quantile(q, h)) is not None}
            if qs:
                quantiles[phase] = qs
        gauges = latest.gauges if latest is not None and up else {}
        return ServerStats(
            target=self.target,
            lane=self.lane,
            up=up,
            scrape_errors=self._errors,
            scrape_duration_s=latest.duration_s if latest is not None else None,
            phase_quantiles=quantiles,
            requests_running=gauges.get(names.VLLM_NUM_REQUESTS_RUNNING),
            requests_waiting=gauges.get(names.VLLM_NUM_REQUESTS_WAITING),
            kv_cache_usage=gauges.get(names.VLLM_KV_CACHE_USAGE_PERC),
            prefix_cache_hit_ratio=self._ratio(
                names.VLLM_PREFIX_CACHE_HITS_TOTAL, names.VLLM_PREFIX_CACHE_QUERIES_TOTAL
            ),
            spec_decode_acceptance_ratio=self._ratio(
                names.VLLM_SPEC_DECODE_NUM_ACCEPTED_TOKENS_TOTAL,
                names.VLLM_SPEC_DECODE_NUM_DRAFT_TOKENS_TOTAL,
            )
            if self._has_counter(names.VLLM_SPEC_DECODE_NUM_DRAFT_TOKENS_TOTAL)
            else gauges.get(names.VLLM_LEGACY_SPEC_DECODE_DRAFT_ACCEPTANCE_RATE),
            preemptions=self._preemptions,
            missing_families=missing_families(self._last_up.families) if self._last_up is not None else (),
        )

    def window_histogram(self, metric: str) -> Buckets | None:
        """The histogram's observations inside the window (deltas with the latest bounds)."""
        total: Buckets | None = None
        for d in reversed(self._deltas):
            h = d.histograms.get(metric)
            if h is None:
                continue
            if total is None:
                total = h
            elif h.bounds == total.bounds:
                total = buckets_add(total, h)
        return total

    def _has_counter(self, name: str) -> bool:
        return self._last_up is not None and name in self._last_up.counters

    def _ratio(self, num: str, den: str) -> float | None:
        n = math.fsum(d.counters.get(num, 0.0) for d in self._deltas)
        m = math.fsum(d.counters.get(den, 0.0) for d in self._deltas)
        return n / m if m > 0 else None


# ---------------------------------------------------------------- I/O: fetch on an interval


async def scrape_once(
    client: httpx.AsyncClient, target: str, lane: str, url: str, timeout_s: float
) -> ServerSnapshot:
    """Fetch and parse one target's /metrics; any failure becomes a failed snapshot, never an exception."""
    import httpx

    start = time.monotonic()
    try:
        resp = await client.get(url, timeout=timeout_s)
        text = resp.text
    except httpx.TimeoutException:
        return _failed(target, lane, start, "timeout")
    except httpx.HTTPError as exc:
        return _failed(target, lane, start, f"connect: {type(exc).__name__}")
    if resp.status_code != 200:
        return _failed(target, lane, start, f"http_{resp.status_code}")
    parser = MetricsParser()
    for chunk in relevant_chunks(text):
        parser.feed(chunk)
        await asyncio.sleep(0)  # the probes time chunks on this loop: never block it for long
    end = time.monotonic()
    return parser.snapshot(target, lane, end, end - start)


def _failed(target: str, lane: str, start: float, error: str) -> ServerSnapshot:
    end = time.monotonic()
    return ServerSnapshot(target, lane, end, end - start, error=error)


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    """Where one target's /metrics lives."""

    target: str
    lane: str
    url: str


async def run_scrape_loop(
    clients: Mapping[str, httpx.AsyncClient],
    targets: Sequence[ScrapeTarget],
    interval_s: float,
    timeout_s: float,
    on_snapshot: Callable[[ServerSnapshot], None],
    stop: asyncio.Event,
) -> None:
    """Scrape every target (with `clients[target]`) each interval until `stop`, spread over the interval.

    Target i of n is scraped at `i / n` of each interval, not all at once: a thousand
    fetches and parses landing in one burst would hold the loop that times the probes.
    """
    loop = asyncio.get_running_loop()
    start = loop.time()
    count = len(targets)

    async def one(i: int, t: ScrapeTarget) -> None:
        due = start + interval_s * i / count
        while not await _stopped_by(stop, due - loop.time()):
            on_snapshot(await scrape_once(clients[t.target], t.target, t.lane, t.url, timeout_s))
            due += interval_s
            if due < loop.time():  # a slow scrape: skip the missed turns, keep the phase
                due += interval_s * math.ceil((loop.time() - due) / interval_s)

    await asyncio.gather(*(one(i, t) for i, t in enumerate(targets)))


async def _stopped_by(stop: asyncio.Event, delay: float) -> bool:
    """Wait `delay` seconds (none if not positive); True when `stop` is set by then."""
    if delay > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)
    return stop.is_set()
