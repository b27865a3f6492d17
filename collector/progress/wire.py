"""The body of `POST /v1/progress`: a reporter's in-flight events (inflight.py) for the fast guard.

`{"reporter": "<id>", "events": [[id, "lane", age_s, first_token], ...]}`: arrays, not objects,
because a busy gateway reports every waiting request a few times a second. The reporter id
names one process for its lifetime (ids restart with it). Parsing is strict and bounded: a
body that is not this shape is refused whole (`ProgressError`, naming the field); an event
that is not `[int, str, finite number, bool]` within bounds is refused alone and counted.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from lanewatch.collector.common.errors import ProtocolViolation
from lanewatch.collector.progress.inflight import Progress

__all__ = [
    "MAX_AGE_S",
    "MAX_EVENTS",
    "PROGRESS_PATH",
    "ParsedProgress",
    "ProgressError",
    "encode_progress",
    "parse_progress",
]

PROGRESS_PATH = "/v1/progress"
MAX_EVENTS = 20_000  # per body
MAX_AGE_S = 6 * 3600.0  # no request is older (record/plausible.py bounds durations alike)
_MAX_ID = 2**63 - 1
_REPORTER = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_LANE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class ProgressError(ProtocolViolation, ValueError):
    """A body that is not a progress report; the message names the field."""


@dataclass(frozen=True, slots=True)
class ParsedProgress:
    """A report's good events and how many were refused."""

    reporter: str
    events: list[Progress]
    refused: int


def encode_progress(reporter: str, events: list[Progress]) -> bytes:
    """The body for one report."""
    rows = [[e.id, e.lane, round(e.age_s, 6), e.first_token] for e in events]
    return json.dumps({"reporter": reporter, "events": rows}, separators=(",", ":")).encode()


def parse_progress(body: bytes) -> ParsedProgress:
    """Parse one report; raises ProgressError when the body is not one."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise ProgressError("body: not JSON") from None
    if not isinstance(doc, dict):
        raise ProgressError("body: not a JSON object")
    reporter = doc.get("reporter")
    if not isinstance(reporter, str) or not _REPORTER.match(reporter):
        raise ProgressError("reporter: 1-64 characters of A-Z a-z 0-9 . _ : -")
    rows = doc.get("events")
    if not isinstance(rows, list):
        raise ProgressError("events: not a list")
    if len(rows) > MAX_EVENTS:
        raise ProgressError(f"events: more than {MAX_EVENTS}")
    events: list[Progress] = []
    refused = 0
    for row in rows:
        event = _event(row)
        if event is None:
            refused += 1
        else:
            events.append(event)
    return ParsedProgress(reporter, events, refused)


def _event(row: Any) -> Progress | None:
    if not isinstance(row, list) or len(row) != 4:
        return None
    rid, lane, age, first = row
    if type(rid) is not int or not 0 <= rid <= _MAX_ID:  # bool is an int: `type` keeps it out
        return None
    if not isinstance(lane, str) or not _LANE.match(lane):
        return None
    if type(age) not in (int, float) or not math.isfinite(age) or not 0 <= age <= MAX_AGE_S:
        return None
    if type(first) is not bool:
        return None
    return Progress(rid, lane, float(age), first)
