"""Ground truth: what the simulator itself measured for each request, kept for the last 10,000.

Served at `GET /debug/requests/{request_id}` (the `x-request-id`, with or without the
`chatcmpl-`/`cmpl-` prefix of the response id). Definitions, all in seconds:
- `arrival_time`: unix time the request arrived (its body read);
- `queue_s`: scheduled - queued, where queued is when the API front end handed it to the engine
  (an injected queue delay counts here), as vLLM's `time_in_queue`;
- `prefill_s`: first token - scheduled; `decode_s`: last token - first token (engine times, as
  vLLM's spans);
- `ttft_s`: arrival to the first content chunk handed to the socket (non-streaming: to the first
  token); `e2e_s`: arrival to the last byte of the response handed to the socket.
So ttft_s >= queue_s + prefill_s: the rest is the front end and delivery.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

MAX_RECORDS = 10_000
_PREFIXES = ("chatcmpl-", "cmpl-")


@dataclass(frozen=True)
class TruthRecord:
    """One request's measured phases and counts."""

    request_id: str
    trace_id: str | None
    arrival_time: float
    queue_s: float
    prefill_s: float
    ttft_s: float
    decode_s: float
    e2e_s: float
    prompt_tokens: int
    output_tokens: int
    finished_reason: str
    http_status: int
    cached_tokens: int = 0
    preemptions: int = 0

    def to_json(self) -> dict[str, Any]:
        """The JSON object served for this request."""
        return asdict(self)


class TruthStore:
    """The most recent records by request id, oldest dropped first."""

    def __init__(self, capacity: int = MAX_RECORDS) -> None:
        self.capacity = capacity
        self._records: OrderedDict[str, TruthRecord] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def add(self, record: TruthRecord) -> None:
        """Keep `record`, replacing one with the same id."""
        self._records.pop(record.request_id, None)
        self._records[record.request_id] = record
        while len(self._records) > self.capacity:
            self._records.popitem(last=False)

    def get(self, request_id: str) -> TruthRecord | None:
        """The record for an x-request-id or a response id, if still kept."""
        found = self._records.get(request_id)
        if found is None:
            for prefix in _PREFIXES:
                if request_id.startswith(prefix):
                    return self._records.get(request_id[len(prefix) :])
        return found
