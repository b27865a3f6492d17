"""The demo's records: tail what the collector and gateway append, keep them, copy them to --out.

`RecordTail` reads the complete lines a child has appended since the last poll (a partial
last line waits for its newline) and parses each with recordfile's checks. `Recorder` joins
the tails, appends every good line to the run's records.jsonl, and keeps the records for
statistics: the last `window_s` seconds for the live view, the whole run for summary.json.
`lane_stats` is pure.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from lanewatch.collector.record.files import RecordFileError, RecordsWriter, parse_record_line
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.collector.record.window import Summary, Window, itl_summary, record_value, summarize

__all__ = ["PHASES", "RecordTail", "Recorder", "lane_stats"]

# Every phase the live view and summary show per lane, in the order a request meets them.
PHASES: tuple[str, ...] = (
    "dns",
    "connect",
    "tls",
    "send",
    "queue",
    "prefill",
    "ttft",
    "itl",
    "tpot",
    "decode",
    "e2e",
)
MAX_KEPT = 200_000  # records kept for the summary; a demo makes a few thousand


class RecordTail:
    """New complete lines of a file another process appends to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.bad_lines = 0
        self._line_no = 0

    def poll(self) -> list[RequestTiming]:
        """Records in the lines appended since the last poll (none while the file does not exist)."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        records = []
        for line in lines:
            self._line_no += 1
            if not line.strip():
                continue
            try:
                records.append(parse_record_line(line, self._line_no))
            except RecordFileError:
                self.bad_lines += 1
        return records


class Recorder:
    """Every record of the run from its sources, written to `out` (when given) as they arrive."""

    def __init__(self, sources: Iterable[Path], out: Path | None, window_s: float = 30.0) -> None:
        self.tails = [RecordTail(p) for p in sources]
        self.window = Window(window_s)
        self.kept: list[RequestTiming] = []
        self.out = out
        self._writer: RecordsWriter | None = None
        if out is not None:
            out.unlink(missing_ok=True)  # this run's records only
            self._writer = RecordsWriter(out)

    def poll(self) -> int:
        """Take in what every source appended; returns how many records arrived."""
        now = time.monotonic()
        new = [r for tail in self.tails for r in tail.poll()]
        for r in new:
            self.window.add(r, now)
            if len(self.kept) < MAX_KEPT:
                self.kept.append(r)
            if self._writer is not None:
                self._writer.write(r)
        return len(new)

    @property
    def bad_lines(self) -> int:
        """Lines of the sources that were not records."""
        return sum(t.bad_lines for t in self.tails)

    def recent(self) -> list[RequestTiming]:
        """Records of the last window."""
        return self.window.records(time.monotonic())

    def close(self) -> None:
        """Close records.jsonl."""
        if self._writer is not None:
            self._writer.close()


def _summary(records: Sequence[RequestTiming], phase: str) -> Summary | None:
    if phase == "itl":
        return itl_summary(records)
    return summarize(v for r in records if (v := record_value(r, phase)) is not None)


def lane_stats(records: Iterable[RequestTiming]) -> dict[str, dict[str, Summary]]:
    """Per lane, the distribution of every phase over the records that succeeded."""
    by_lane: dict[str, list[RequestTiming]] = {}
    for r in records:
        if r.ok:
            by_lane.setdefault(r.lane, []).append(r)
    out: dict[str, dict[str, Summary]] = {}
    for lane, rs in sorted(by_lane.items()):
        phases = {p: s for p in PHASES if (s := _summary(rs, p)) is not None}
        out[lane] = phases
    return out
