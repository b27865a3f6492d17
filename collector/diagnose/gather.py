"""The diagnosis's entry point at its edge: a records file, a Prometheus, or both -> one evidence Window.

With both, the records give each lane's request stats (they hold what histograms cannot: ITL gaps,
per-request connections, prompt sizes) and Prometheus gives vLLM's series; a lane only Prometheus
knows takes its request stats from lanewatch's series there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.diagnose.evidence import LaneEvidence, SloTargets, Window
from lanewatch.collector.diagnose.queries import RUN_TIMEOUT_S, TIMEOUT_S, LaneQueries, valid_duration
from lanewatch.collector.diagnose.records import MAX_LANES, Folded, lanes_from_keyed
from lanewatch.collector.diagnose.registry import select, server_keys
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from lanewatch.collector.record.codec import RecordDecodeError
from lanewatch.collector.record.files import RecordFileError, keyed_records, records_at
from lanewatch.exporters.names import OTHER_VALUE

if TYPE_CHECKING:
    import httpx

__all__ = ["DiagnoseInputError", "Sources", "gather"]


class DiagnoseInputError(ConfigError):
    """Input the diagnosis cannot use; the message names the flag, the file or the line."""


@dataclass(frozen=True)
class Sources:
    """Where the evidence comes from, and for which lanes."""

    records: Path | None = None
    prometheus: str | None = None
    lanes: tuple[str, ...] = ()  # empty: every lane the records or the SLOs name
    window: str = "10m"
    skip_bad: bool = False


def gather(
    sources: Sources,
    slos: Mapping[str, SloTargets],
    pairs: Sequence[tuple[str, str]] = (),
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    transport: httpx.BaseTransport | None = None,
    timeout_s: float = TIMEOUT_S,
    deadline_s: float = RUN_TIMEOUT_S,
) -> tuple[Window, tuple[str, ...]]:
    """The evidence window and the Prometheus queries asked (none without --prometheus); each query
    ends within `timeout_s` and all of them within `deadline_s`, or DiagnoseInputError says which.

    Of vLLM's series only those the checks the thresholds choose (`checks`, `skip`) need or read
    are asked for."""
    if sources.records is None and sources.prometheus is None:
        raise DiagnoseInputError("give a records file, --prometheus URL, or both")
    if not valid_duration(sources.window):
        raise DiagnoseInputError(f"--window: {sources.window!r} is not a Prometheus duration such as 10m")
    folded = Folded()
    lanes = _from_records(sources, slos, pairs, thresholds, folded) if sources.records else {}
    described = [f"records {sources.records}"] if sources.records else []
    if folded.records:
        described.append(
            f"{folded.records:,} records of lanes past the first {MAX_LANES:,} (from {folded.first!r} on) "
            f"counted as lane {OTHER_VALUE!r}"
        )
    queries: tuple[str, ...] = ()
    if sources.prometheus:
        wanted = sources.lanes or tuple(sorted(set(lanes) | set(slos)))
        # a fast lane is judged against its slow partner: fetch the partner too, as evidence
        wanted += tuple(s for f, s in pairs if f in wanted and s not in wanted)
        lanes, queries = _from_prometheus(
            sources, wanted, lanes, slos, thresholds, transport, timeout_s, deadline_s
        )
        described.append(f"prometheus {sources.prometheus} over {sources.window}")
    if sources.lanes:
        unknown = [lane for lane in sources.lanes if lane not in lanes]
        if unknown:
            raise DiagnoseInputError(f"--lane: no records for lane {', '.join(unknown)}")
    span = sources.window if sources.prometheus else None
    window = Window(lanes, tuple(pairs), span, tuple(described), only=sources.lanes)
    return window, queries


def _from_records(
    sources: Sources,
    slos: Mapping[str, SloTargets],
    pairs: Sequence[tuple[str, str]],
    t: Thresholds,
    folded: Folded,
) -> dict[str, LaneEvidence]:
    path = sources.records
    assert path is not None
    # the lanes asked for, their partners and the SLOs' keep their own summary past MAX_LANES
    keep = {*sources.lanes, *slos, *(s for f, s in pairs if f in sources.lanes)}
    # Read as a stream: each record is folded into its lane's summary and dropped, so a file of
    # any size takes a few numbers per record; the few records whose stalls are counted are read
    # again at their lines.
    try:
        keyed = keyed_records(path, [] if sources.skip_bad else None)
        return lanes_from_keyed(keyed, lambda keys: records_at(path, keys), slos, t, keep=keep, folded=folded)
    except RecordFileError as exc:
        raise DiagnoseInputError(f"{path}: {exc} (or --skip-bad to skip such lines)") from None
    except RecordDecodeError as exc:  # a line that changed between the two reads
        raise DiagnoseInputError(f"{path}: changed while it was read: {exc}") from None
    except OSError as exc:
        raise DiagnoseInputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _from_prometheus(
    sources: Sources,
    wanted: Sequence[str],
    lanes: dict[str, LaneEvidence],
    slos: Mapping[str, SloTargets],
    t: Thresholds,
    transport: httpx.BaseTransport | None,
    timeout_s: float,
    deadline_s: float,
) -> tuple[dict[str, LaneEvidence], tuple[str, ...]]:
    assert sources.prometheus is not None
    # httpx and the client load only to ask a Prometheus: a records file needs neither
    from lanewatch.collector.diagnose.prometheus import PrometheusError, PrometheusSource

    if not sources.prometheus.startswith(("http://", "https://")):
        raise DiagnoseInputError(f"--prometheus: {sources.prometheus!r} is not an http(s) URL")
    keys = server_keys(select(t.checks, t.skip, only_from="diagnose.checks", skip_from="diagnose.skip"))
    prom = PrometheusSource(
        sources.prometheus, timeout_s=timeout_s, deadline_s=deadline_s, transport=transport
    )
    out = dict(lanes)
    try:
        for name in wanted:
            q = LaneQueries(name, sources.window)
            server = prom.server_series(q, keys)
            if name in out:
                out[name] = replace(out[name], server=server)
            else:
                out[name] = LaneEvidence(name, prom.lane_stats(q, t), server, slos.get(name, SloTargets()))
    except PrometheusError as exc:
        raise DiagnoseInputError(f"--prometheus: {exc}") from None
    finally:
        prom.close()
    return out, tuple(prom.queries)
