"""What the report shows, computed from records and events: pure, no markup, no I/O.

Statistics come from collector/record/window.py (quantile, group_stats, flatness, the fit, the
rolling Window); this module only groups records and picks what each chart needs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.diagnose import LaneDiagnosis
from lanewatch.collector.record.goodput import Goodput, Tally, tally
from lanewatch.collector.record.timing import BREAKDOWN_PARTS, SERVER_WAIT, RequestTiming, breakdown
from lanewatch.collector.record.window import (
    GroupStats,
    LinearFit,
    Window,
    coefficient_of_variation,
    fit_fixed_per_token,
    flatness,
    group_stats,
    quantile,
)

from .diagnosis import diagnosis_of

# Stacking order of the phase breakdown: server_wait stands where queue..residual would.
PART_ORDER: tuple[str, ...] = (*BREAKDOWN_PARTS[:6], "residual", SERVER_WAIT, "decode")
# The demo's events, in the order a healthy loop emits them; other kinds are shown as they come.
EVENT_KINDS: tuple[str, ...] = (
    "fault_injected",
    "alert_firing",
    "degrade_applied",
    "fault_cleared",
    "alert_resolved",
    "degrade_restored",
)
# Start and end kinds of each span drawn on the timeline's strip.
SPAN_KINDS: tuple[tuple[str, str, str], ...] = (
    ("fault", "fault_injected", "fault_cleared"),
    ("alert", "alert_firing", "alert_resolved"),
    ("degrade", "degrade_applied", "degrade_restored"),
)
ALL_CLASSES = "(all)"
MAX_POINTS = 2500  # per lane and metric in a scatter: more only slows the browser
TIMELINE_STEPS = 150


class SummaryError(ConfigError, ValueError):
    """summary.json is not what the report can read; the message names the field."""


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened during the run, at Unix time t."""

    t: float
    kind: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Box:
    """E2E distribution of one lane and request class (ok requests)."""

    lane: str
    request_class: str
    n: int
    q1: float
    median: float
    q3: float
    lo: float  # p1
    hi: float  # p99
    mean: float
    cv: float | None


@dataclass(frozen=True, slots=True)
class LaneBreakdown:
    """Mean of each breakdown part over a lane's ok requests; the parts add up to mean e2e."""

    lane: str
    n: int
    with_server_phases: int
    parts: tuple[tuple[str, float], ...]

    @property
    def total(self) -> float:
        """Mean e2e of the requests counted."""
        return math.fsum(v for _, v in self.parts)


@dataclass(frozen=True, slots=True)
class LanePoints:
    """(output tokens, seconds) of one lane and metric, maybe thinned, with its fit."""

    lane: str
    metric: str  # "ttft" or "e2e"
    points: tuple[tuple[float, float], ...]
    total: int  # points before thinning
    fit: LinearFit | None


@dataclass(frozen=True, slots=True)
class TimelineSeries:
    """Rolling P99 TTFT of one lane: (seconds since t0, value or None where no data)."""

    lane: str
    points: tuple[tuple[float, float | None], ...]


@dataclass(frozen=True, slots=True)
class TableRow:
    """Statistics of one lane and request class (or ALL_CLASSES), errors by kind."""

    lane: str
    request_class: str
    stats: GroupStats
    errors_by_kind: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class FailureReason:
    """One reason requests failed: the server's message (secrets already redacted), and how often."""

    lane: str
    kind: str
    status: int | None
    message: str
    count: int


@dataclass(frozen=True, slots=True)
class GoodputRow:
    """Goodput of one routed lane and request class (or ALL_CLASSES)."""

    lane: str  # the lane the requests were routed to
    request_class: str
    tally: Tally


@dataclass(frozen=True, slots=True)
class RescueRow:
    """The gateway's rescues from one late lane into a faster one: sent, won, and the time they saved."""

    late_lane: str
    to_lane: str
    sent: int
    won: int  # answered by `to_lane`; the others by the late lane after all (lost) or failed
    saved_s: float | None  # median over the won ones of the late wait less the client's TTFT (at least)


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the report renders."""

    source: str
    n_records: int
    n_ok: int
    bad_lines: int
    t0: float | None  # earliest started_at (Unix seconds); None without timestamps
    t1: float | None
    lanes: tuple[str, ...]
    classes: tuple[str, ...]  # ordered by mean output tokens: the work grows left to right
    class_tokens: Mapping[str, float]
    targets: tuple[str, ...]
    models: tuple[str, ...]
    sources: tuple[str, ...]
    boxes: tuple[Box, ...]
    flatness: Mapping[str, float]  # lane -> CV of mean e2e across classes
    breakdowns: tuple[LaneBreakdown, ...]
    points: tuple[LanePoints, ...]
    timeline: tuple[TimelineSeries, ...]
    timeline_window_s: float
    events: tuple[Event, ...]
    rows: tuple[TableRow, ...]
    goodput: tuple[GoodputRow, ...] = ()  # empty without an SLO spec to judge by
    reasons: tuple[FailureReason, ...] = ()
    diagnosis: tuple[LaneDiagnosis, ...] = ()  # `lanewatch diagnose` over the same records
    judged: bool = False  # whether an SLO spec anchored the goodput and the diagnosis
    rescues: tuple[RescueRow, ...] = ()


def parse_events(summary: object) -> tuple[Event, ...]:
    """The `events` of a summary.json document, sorted by time; SummaryError names a bad field."""
    if not isinstance(summary, dict):
        raise SummaryError("expected a JSON object at the top")
    raw = summary.get("events", [])
    if not isinstance(raw, list):
        raise SummaryError("events: expected a list")
    return tuple(sorted((_event(i, e) for i, e in enumerate(raw)), key=lambda e: e.t))


def _event(i: int, raw: object) -> Event:
    if not isinstance(raw, dict):
        raise SummaryError(f"events[{i}]: expected an object")
    t, kind = raw.get("t"), raw.get("kind")
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise SummaryError(f"events[{i}].t: expected Unix seconds, got {t!r}")
    if not isinstance(kind, str) or not kind:
        raise SummaryError(f"events[{i}].kind: expected a string, got {kind!r}")
    detail = ", ".join(f"{k}={v}" for k, v in raw.items() if k not in ("t", "kind"))
    return Event(float(t), kind, detail)


def build_report(
    records: Sequence[RequestTiming],
    events: Sequence[Event] = (),
    source: str = "",
    bad_lines: int = 0,
    judge: Goodput | None = None,
) -> ReportData:
    """Compute every chart's and table's data from the records and events (goodput with a judge)."""
    ok = [r for r in records if r.ok]
    stamps = [r.started_at for r in records if r.started_at > 0]
    t0, t1 = (min(stamps), max(stamps)) if stamps else (None, None)
    lanes = tuple(sorted({r.lane for r in records}))
    class_tokens = _class_tokens(records)
    classes = tuple(sorted({r.request_class for r in records}, key=lambda c: (class_tokens.get(c, 0), c)))
    window_s = _timeline_window(t0, t1)
    return ReportData(
        source=source,
        n_records=len(records),
        n_ok=len(ok),
        bad_lines=bad_lines,
        t0=t0,
        t1=t1,
        lanes=lanes,
        classes=classes,
        class_tokens=class_tokens,
        targets=tuple(sorted({r.target for r in records})),
        models=tuple(sorted({r.model for r in records})),
        sources=tuple(sorted({r.source for r in records})),
        boxes=boxes(ok, lanes, classes),
        flatness=_flatness(ok),
        breakdowns=tuple(b for lane in lanes if (b := lane_breakdown(lane, ok)) is not None),
        points=tuple(p for lane in lanes for m in ("ttft", "e2e") if (p := lane_points(lane, m, ok))),
        timeline=rolling_p99_ttft(records, t0, t1, window_s) if t0 is not None and t1 is not None else (),
        timeline_window_s=window_s,
        events=tuple(events),
        rows=table_rows(records, lanes, classes),
        goodput=goodput_rows(judge, records, classes) if judge is not None else (),
        reasons=failure_reasons(records),
        diagnosis=diagnosis_of(records, judge) if records else (),
        judged=judge is not None,
        rescues=rescue_rows(records),
    )


def rescue_rows(records: Iterable[RequestTiming]) -> tuple[RescueRow, ...]:
    """Per late lane and the lane its rescues won on: how many were sent and won, the median time saved.

    A lost or failed rescue's record is the late lane's and does not name where the rescue went: it
    counts under the late lane's first target that won (`?` when none did)."""
    won: Counter[tuple[str, str]] = Counter()
    saved: dict[tuple[str, str], list[float]] = {}
    not_won: Counter[str] = Counter()
    for r in records:
        if r.late_lane is None:
            continue
        if r.lane == r.late_lane:
            not_won[r.late_lane] += 1
            continue
        key = (r.late_lane, r.lane)
        won[key] += 1
        if r.late_wait_s is not None and r.ttft_s is not None:
            saved.setdefault(key, []).append(max(r.late_wait_s - r.ttft_s, 0.0))
    keys = set(won) | {(late, "?") for late in not_won if not any(k[0] == late for k in won)}
    rows = []
    for late, to in sorted(keys):
        first = min(t for lane, t in keys if lane == late) == to
        saves = sorted(saved.get((late, to), []))
        sent = won[(late, to)] + (not_won[late] if first else 0)
        rows.append(RescueRow(late, to, sent, won[(late, to)], saves[len(saves) // 2] if saves else None))
    return tuple(rows)


def failure_reasons(records: Iterable[RequestTiming], limit: int = 10) -> tuple[FailureReason, ...]:
    """The most frequent server messages of failed requests, per lane, kind and status (most first)."""
    counts = Counter(
        (r.lane, r.error.value, r.status, r.error_message)
        for r in records
        if r.error is not None and r.error_message
    )
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1], kv[0][3] or ""))[:limit]
    return tuple(
        FailureReason(lane, kind, status, message or "", n) for (lane, kind, status, message), n in top
    )


def goodput_rows(
    judge: Goodput, records: Sequence[RequestTiming], classes: Sequence[str]
) -> tuple[GoodputRow, ...]:
    """Per routed lane: a row per request class, then the lane over all classes."""
    by_key = tally(judge, records)
    rows = []
    for lane in sorted({lane for lane, _ in by_key}):
        total = Tally()
        for c in classes:
            if (t := by_key.get((lane, c))) is not None and t.total:
                rows.append(GoodputRow(lane, c, t))
                total = Tally(total.met + t.met, total.missed + t.missed, total.failed + t.failed)
        rows.append(GoodputRow(lane, ALL_CLASSES, total))
    return tuple(rows)


def _class_tokens(records: Iterable[RequestTiming]) -> dict[str, float]:
    tokens: dict[str, list[int]] = {}
    for r in records:
        if r.ok and r.output_tokens is not None:
            tokens.setdefault(r.request_class, []).append(r.output_tokens)
    return {c: math.fsum(v) / len(v) for c, v in tokens.items()}


def boxes(ok: Sequence[RequestTiming], lanes: Sequence[str], classes: Sequence[str]) -> tuple[Box, ...]:
    """One E2E box per lane and class that has ok requests, classes outermost."""
    e2e: dict[tuple[str, str], list[float]] = {}
    for r in ok:
        if r.e2e_s is not None:
            e2e.setdefault((r.request_class, r.lane), []).append(r.e2e_s)
    out = []
    for c in classes:
        for lane in lanes:
            if xs := sorted(e2e.get((c, lane), [])):
                q = [quantile(xs, p) for p in (0.01, 0.25, 0.5, 0.75, 0.99)]
                mean = math.fsum(xs) / len(xs)
                out.append(
                    Box(lane, c, len(xs), q[1], q[2], q[3], q[0], q[4], mean, coefficient_of_variation(xs))
                )
    return tuple(out)


def _flatness(ok: Sequence[RequestTiming]) -> dict[str, float]:
    sums: dict[str, dict[str, list[float]]] = {}
    for r in ok:
        if r.e2e_s is not None:
            sums.setdefault(r.lane, {}).setdefault(r.request_class, []).append(r.e2e_s)
    out = {}
    for lane, by_class in sums.items():
        cv = flatness({c: math.fsum(v) / len(v) for c, v in by_class.items()})
        if cv is not None:
            out[lane] = cv
    return out


def lane_breakdown(lane: str, ok: Sequence[RequestTiming]) -> LaneBreakdown | None:
    """Mean breakdown of a lane; a part a record lacks counts 0, so the means stack to mean e2e."""
    sums: dict[str, float] = dict.fromkeys(PART_ORDER, 0.0)
    n = joined = 0
    for r in ok:
        if r.lane != lane or not (parts := breakdown(r)):
            continue
        n += 1
        joined += r.has_server_phases and r.phases_source != "response"  # older records name no source
        for name, value in parts.items():
            sums[name] += value
    if n == 0:
        return None
    present = tuple((p, sums[p] / n) for p in PART_ORDER if sums[p] > 0)
    return LaneBreakdown(lane, n, joined, present)


def lane_points(lane: str, metric: str, ok: Sequence[RequestTiming]) -> LanePoints | None:
    """Seconds of `metric` against output tokens for one lane, with the fixed + per-token fit."""
    pts = [
        (float(r.output_tokens), v)
        for r in ok
        if r.lane == lane and r.output_tokens is not None and (v := getattr(r, f"{metric}_s")) is not None
    ]
    if not pts:
        return None
    fit = fit_fixed_per_token([x for x, _ in pts], [y for _, y in pts])
    stride = math.ceil(len(pts) / MAX_POINTS)
    return LanePoints(lane, metric, tuple(pts[::stride]), len(pts), fit)


def _timeline_window(t0: float | None, t1: float | None) -> float:
    """A rolling window about a twelfth of the run: long enough for a P99, short enough to move."""
    span = (t1 - t0) if t0 is not None and t1 is not None else 0.0
    return max(span / 12, 1.0)


def rolling_p99_ttft(
    records: Sequence[RequestTiming], t0: float, t1: float, window_s: float
) -> tuple[TimelineSeries, ...]:
    """P99 TTFT per lane over the last window_s seconds of request starts, at evenly spaced times."""
    timed = sorted((r for r in records if r.started_at > 0), key=lambda r: r.started_at)
    lanes = sorted({r.lane for r in timed})
    window = Window(window_s=window_s, max_records=len(timed) + 1, max_bytes=None)  # the whole file
    step = max((t1 - t0) / TIMELINE_STEPS, 1e-3)
    series: dict[str, list[tuple[float, float | None]]] = {lane: [] for lane in lanes}
    i = 0
    for k in range(TIMELINE_STEPS + 1):
        now = t0 + k * step
        while i < len(timed) and timed[i].started_at <= now + 1e-9:
            window.add(timed[i], timed[i].started_at)
            i += 1
        p99 = window.lane_p99_ttft(now)
        for lane in lanes:
            series[lane].append((now - t0, p99.get(lane)))
        if now >= t1:
            break
    return tuple(TimelineSeries(lane, tuple(pts)) for lane, pts in series.items())


def table_rows(
    records: Sequence[RequestTiming], lanes: Sequence[str], classes: Sequence[str]
) -> tuple[TableRow, ...]:
    """Per lane: a row per request class, then the lane over all classes."""
    rows = []
    for lane in lanes:
        in_lane = [r for r in records if r.lane == lane]
        for c in classes:
            if group := [r for r in in_lane if r.request_class == c]:
                rows.append(_row(lane, c, group))
        rows.append(_row(lane, ALL_CLASSES, in_lane))
    return tuple(rows)


def _row(lane: str, request_class: str, records: Sequence[RequestTiming]) -> TableRow:
    targets = ",".join(sorted({r.target for r in records}))
    kinds = Counter(r.error.value for r in records if r.error is not None)
    return TableRow(
        lane,
        request_class,
        group_stats((targets, lane, request_class), records),
        tuple(sorted(kinds.items())),
    )


def spans(events: Sequence[Event], end: float) -> list[tuple[str, float, float]]:
    """(row, start, end) intervals from paired events; one still open runs to `end`."""
    out = []
    for row, start_kind, end_kind in SPAN_KINDS:
        start: float | None = None
        for e in events:
            if e.kind == start_kind and start is None:
                start = e.t
            elif e.kind == end_kind and start is not None:
                out.append((row, start, e.t))
                start = None
        if start is not None:
            out.append((row, start, max(end, start)))
    return out
