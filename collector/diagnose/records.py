"""Request records -> each lane's `LaneEvidence`: every record folded into its lane's summary (lane_stats.py).

Pure: the records are passed in, from a list or as a file is read (collector/record/files.py).
A lane is the lane that served the request (`lane`): the engine the time was spent in. Records
that come once (a file read as a stream) come with a key, and `again` fetches the few records the
stall count needs a second look at by their keys: a file seeks to their lines.

Lanes are a bounded label set, as everywhere in lanewatch: a diagnosis folds at most MAX_LANES
lanes apart (a few KB each). The records of lanes past the first MAX_LANES (in the order they
come) are counted under lane `other`, as the collector counts a lane outside its closed set; a
lane the caller names (`keep`) always keeps its own summary.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from lanewatch.collector.diagnose.evidence import LaneEvidence, LaneStats, ServerSeries, SloTargets
from lanewatch.collector.diagnose.lane_stats import LaneFold
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.exporters.names import OTHER_VALUE

__all__ = ["MAX_LANES", "Again", "Folded", "lane_stats", "lanes_from_keyed", "lanes_from_records"]

# Lanes summarised apart; the collector's closed lane sets and series budgets keep far fewer.
MAX_LANES = 1000

# Fetches records again by the keys they came with (in the order given).
Again = Callable[[Sequence[int]], Iterable[tuple[int, RequestTiming]]]


@dataclass
class Folded:
    """The records counted as lane `other`, their lane being past MAX_LANES, and the first such lane."""

    records: int = 0
    first: str = ""


def lanes_from_records(
    records: Iterable[RequestTiming],
    slos: Mapping[str, SloTargets] | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    server: Mapping[str, ServerSeries] | None = None,
) -> dict[str, LaneEvidence]:
    """One LaneEvidence per lane the records name."""
    rs = records if isinstance(records, Sequence) else tuple(records)
    return lanes_from_keyed(enumerate(rs), lambda keys: ((k, rs[k]) for k in keys), slos, thresholds, server)


def lanes_from_keyed(
    keyed: Iterable[tuple[int, RequestTiming]],
    again: Again,
    slos: Mapping[str, SloTargets] | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    server: Mapping[str, ServerSeries] | None = None,
    *,
    keep: Collection[str] = (),
    max_lanes: int = MAX_LANES,
    folded: Folded | None = None,
) -> dict[str, LaneEvidence]:
    """lanes_from_records over records seen once, each with a key that `again` fetches it by; the
    records of lanes past `max_lanes` (but those in `keep`) go to lane `other`, counted in `folded`."""
    slos, server = slos or {}, server or {}
    folds: dict[str, LaneFold] = {}
    apart = 0  # lanes folded apart that `keep` did not name (they count against max_lanes)
    for key, r in keyed:
        fold = folds.get(r.lane)
        if fold is None:
            lane = r.lane
            if lane not in keep and lane != OTHER_VALUE:
                if apart >= max_lanes:
                    lane = OTHER_VALUE
                    if folded is not None:
                        folded.records += 1
                        folded.first = folded.first or r.lane
                else:
                    apart += 1
            fold = folds.get(lane)
            if fold is None:
                fold = folds[lane] = LaneFold(slos.get(lane, SloTargets()).tpot_s, thresholds)
        fold.add(key, r)
    wanted = sorted(key for fold in folds.values() for key in fold.stall_keys())
    if wanted:  # one pass over the source for every lane, in key order (a file: forward seeks)
        for key, r in again(wanted):
            if (fold := folds.get(r.lane) or folds.get(OTHER_VALUE)) is not None:
                fold.see_stalls(key, r)
    return {
        lane: LaneEvidence(lane, fold.stats(), server.get(lane, ServerSeries()), slos.get(lane, SloTargets()))
        for lane, fold in sorted(folds.items())
    }


def lane_stats(records: Sequence[RequestTiming], slo: SloTargets, t: Thresholds) -> LaneStats:
    """The stats of one lane's records over the window."""
    fold = LaneFold(slo.tpot_s, t)
    for key, r in enumerate(records):
        fold.add(key, r)
    for key in fold.stall_keys():
        fold.see_stalls(key, records[key])
    return fold.stats()
