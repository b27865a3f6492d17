"""The fault model: what `POST /admin/faults` and `lanewatch sim --faults` accept.

The body is one JSON object; every field is optional and an absent field means "no such fault".
A POST replaces the whole fault set (it is declarative: posting the same body twice is the same
as posting it once); `DELETE /admin/faults` clears it; `GET /admin/faults` shows it.

    {
      "queue_delay_s": 0.5,           # extra time each request waits in the engine's queue
      "frontend_delay_s": 0.2,        # extra time each request spends in the API front end,
                                      #   before the engine's queue (in TTFT, not in queue_s)
      "prefill_slowdown": 2.0,        # prefill steps take this many times longer (> 0)
      "decode_slowdown": 3.0,         # decode steps take this many times longer (> 0)
      "stall_s": 1.0,                 # a stream pauses this long mid-stream ...
      "stall_after_tokens": 4,        # ... after this many content chunks (default 1)
      "stall_rate": 1.0,              # share of streams that stall (default 1)
      "error_rates": {"429": 0.1, "500": 0.05, "503": 0.0},
                                      # share of requests answered with that status at once,
                                      # as OpenAI error JSON (429 adds Retry-After); sum <= 1
      "truncate_after_tokens": 8,     # a stream is cut (connection closed, no [DONE]) after
      "truncate_rate": 1.0,           #   this many content chunks, for this share of streams
      "malformed_after_tokens": 2,    # a stream carries one malformed SSE frame (broken JSON)
      "malformed_rate": 1.0,          #   after this many content chunks, for this share
      "refuse_connections_s": 2.0,    # stop listening for this long: new connections are
                                      #   refused (ECONNREFUSED); open ones keep working
      "tls_handshake_delay_s": 0.3    # over TLS, each new connection's handshake starts this
                                      #   late (its ClientHello waits unread); no effect over HTTP
    }

Slowdowns scale the engine's step time (a step that mixes prefill and decode scales by the
token-weighted mix), so they show in vLLM's own metrics and spans too. Stalls, truncation and
malformed frames happen at the HTTP edge, after the engine. Which requests a rate hits is drawn
from a generator seeded by `--seed`, so a run is reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ERROR_STATUSES = (429, 500, 503)
Rate = float


class FaultSpec(BaseModel):
    """The active faults; the defaults mean none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    queue_delay_s: float = Field(default=0.0, ge=0, le=3600)
    frontend_delay_s: float = Field(default=0.0, ge=0, le=3600)
    prefill_slowdown: float = Field(default=1.0, gt=0, le=1000)
    decode_slowdown: float = Field(default=1.0, gt=0, le=1000)
    stall_s: float = Field(default=0.0, ge=0, le=3600)
    stall_after_tokens: int = Field(default=1, ge=0)
    stall_rate: Rate = Field(default=1.0, ge=0, le=1)
    error_rates: dict[int, Rate] = Field(default_factory=dict)
    truncate_after_tokens: int | None = Field(default=None, ge=0)
    truncate_rate: Rate = Field(default=1.0, ge=0, le=1)
    malformed_after_tokens: int | None = Field(default=None, ge=0)
    malformed_rate: Rate = Field(default=1.0, ge=0, le=1)
    refuse_connections_s: float = Field(default=0.0, ge=0, le=3600)
    tls_handshake_delay_s: float = Field(default=0.0, ge=0, le=60)

    @field_validator("error_rates")
    @classmethod
    def _known_statuses(cls, value: dict[int, float]) -> dict[int, float]:
        unknown = sorted(set(value) - set(ERROR_STATUSES))
        if unknown:
            raise ValueError(f"statuses {unknown} not supported; use {list(ERROR_STATUSES)}")
        for status, rate in value.items():
            if not 0 <= rate <= 1:
                raise ValueError(f"rate for {status} must be within 0..1, got {rate}")
        return value

    @model_validator(mode="after")
    def _rates_sum(self) -> FaultSpec:
        if sum(self.error_rates.values()) > 1 + 1e-9:
            raise ValueError("error_rates add up to more than 1")
        return self


class FaultError(ValueError):
    """A fault body that cannot be used; the message names each bad field."""


def parse_faults(data: Any) -> FaultSpec:
    """Validate a fault body (a dict from JSON); raise FaultError naming every bad field."""
    if not isinstance(data, dict):
        raise FaultError("the fault body must be a JSON object")
    try:
        return FaultSpec.model_validate(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}" for e in exc.errors()]
        raise FaultError("; ".join(problems)) from None


@dataclass(frozen=True)
class StreamFaults:
    """What the faults do to one response, drawn when it arrives."""

    error_status: int | None = None
    stall_after: int | None = None
    stall_s: float = 0.0
    truncate_after: int | None = None
    malformed_after: int | None = None


NO_FAULTS = StreamFaults()


class FaultState:
    """The active fault set and the seeded draws that decide which requests it hits."""

    def __init__(self, spec: FaultSpec | None = None, seed: int = 0) -> None:
        self.spec = spec or FaultSpec()
        self._rng = random.Random(seed)

    def replace(self, spec: FaultSpec) -> None:
        """Make `spec` the whole fault set."""
        self.spec = spec

    def clear(self) -> None:
        """Remove every fault."""
        self.spec = FaultSpec()

    def draw(self) -> StreamFaults:
        """Decide what happens to the request arriving now."""
        s = self.spec
        if s == _NONE:
            return NO_FAULTS
        return StreamFaults(
            error_status=self._draw_status(s.error_rates),
            stall_after=s.stall_after_tokens if s.stall_s > 0 and self._hit(s.stall_rate) else None,
            stall_s=s.stall_s,
            truncate_after=self._after(s.truncate_after_tokens, s.truncate_rate),
            malformed_after=self._after(s.malformed_after_tokens, s.malformed_rate),
        )

    def _hit(self, rate: float) -> bool:
        return rate >= 1 or (rate > 0 and self._rng.random() < rate)

    def _after(self, after: int | None, rate: float) -> int | None:
        return after if after is not None and self._hit(rate) else None

    def _draw_status(self, rates: dict[int, float]) -> int | None:
        if not rates:
            return None
        x = self._rng.random()
        for status in sorted(rates):
            if x < rates[status]:
                return status
            x -= rates[status]
        return None


_NONE = FaultSpec()
