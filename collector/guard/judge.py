"""Judges each request once against its lane's TTFT SLO, the moment the answer is known.

A progress event (progress/inflight.py) with a first token is met or missed by its TTFT; a
waiting request is missed once its age passes the threshold, and its later first token
then adds nothing. A finished record (a source that reports no progress: Envoy's access log,
LiteLLM) is judged by its TTFT on arrival; one that failed without a token counts as missed
only when it lasted past the threshold, and never for the client's own errors (a 4xx, a
disconnect): those say nothing about the lane. Pure: `now` is the caller's clock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Literal

from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.record.timing import ErrorKind, RequestTiming

__all__ = ["Judge", "Verdict"]

Verdict = Literal["met", "missed"]
# A 4xx (but 429) or a client gone says nothing of the lane, however long it took; a 429 that
# came only after the threshold is a lane too busy to answer in time.
_NOT_THE_LANES = frozenset({ErrorKind.HTTP_4XX, ErrorKind.CLIENT_DISCONNECT})


class Judge:
    """Thresholds per lane, and the requests judged lately (by reporter and id)."""

    def __init__(
        self, thresholds: Mapping[str, float], remember_s: float = 600.0, max_keys: int = 200_000
    ) -> None:
        self.thresholds = dict(thresholds)
        self._remember_s = remember_s
        self._max_keys = max_keys
        self._judged: OrderedDict[tuple[str, int], float] = OrderedDict()  # key -> when, oldest first
        self.unknown_lane = 0  # events of lanes without a TTFT SLO

    def progress(self, reporter: str, event: Progress, now: float) -> Verdict | None:
        """The verdict on one event, or None (already judged, still in time, or no SLO)."""
        threshold = self.thresholds.get(event.lane)
        if threshold is None:
            self.unknown_lane += 1
            return None
        key = (reporter, event.id)
        when = self._judged.get(key)
        if when is not None:
            if when >= now - self._remember_s:
                return None
            del self._judged[key]  # forgotten: a reporter that restarted under its name reuses ids
        if event.first_token:
            verdict: Verdict = "met" if event.age_s <= threshold else "missed"
        elif event.age_s > threshold:
            verdict = "missed"
        else:
            return None
        self._remember(key, now)
        return verdict

    def record(self, record: RequestTiming) -> Verdict | None:
        """The verdict on a finished record of a source that reports no progress."""
        threshold = self.thresholds.get(record.lane)
        if threshold is None:
            self.unknown_lane += 1
            return None
        if record.ttft_s is not None:
            return "met" if record.ttft_s <= threshold else "missed"
        if record.error is None or record.error in _NOT_THE_LANES:
            return None
        if record.status is not None and 400 <= record.status < 500 and record.status != 429:
            return None  # the client's, whatever the kind says
        return "missed" if record.e2e_s is not None and record.e2e_s > threshold else None

    def _remember(self, key: tuple[str, int], now: float) -> None:
        judged = self._judged
        judged[key] = now
        horizon = now - self._remember_s
        while judged and (len(judged) > self._max_keys or next(iter(judged.values())) < horizon):
            judged.popitem(last=False)
