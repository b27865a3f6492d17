"""Where finished records go: a sink takes one record; `FanOut` hands each record to several.

The gateway fans its tap records out to its metrics (or its shipper) and its records file; the
collector fans every record it counted out to its records file and its listeners. A sink that
raises is logged and skipped: the others still get the record, and the source never stops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from lanewatch.collector.record.timing import RequestTiming

__all__ = ["FanOut", "RecordSink"]

log = logging.getLogger(__name__)

RecordSink = Callable[[RequestTiming], None]


class FanOut:
    """Every record to every sink, in the order they were added."""

    def __init__(self, sinks: Iterable[RecordSink] = ()) -> None:
        self.sinks = list(sinks)

    def add(self, sink: RecordSink) -> None:
        """Also hand every later record to `sink`."""
        self.sinks.append(sink)

    def __call__(self, record: RequestTiming) -> None:
        """Hand `record` to each sink; one that raises is logged, and the rest still get it."""
        for sink in self.sinks:
            try:
                sink(record)
            except Exception as exc:  # a full disk is one line a record, a bug its traceback
                trace = not isinstance(exc, OSError)
                log.error(
                    "record sink %s failed on a %s record: %s",
                    _name(sink),
                    record.source,
                    exc,
                    exc_info=trace,
                )


def _name(sink: RecordSink) -> str:
    return getattr(sink, "__qualname__", None) or type(sink).__name__
