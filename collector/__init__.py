"""lanewatch.collector: sources, the request-timing record, analysis, and the runtime."""

from lanewatch.collector.record.timing import BREAKDOWN_PARTS, ErrorKind, RequestTiming, breakdown

__all__ = ["BREAKDOWN_PARTS", "ErrorKind", "RequestTiming", "breakdown"]
