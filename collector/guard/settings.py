"""The fast guard's settings (`guard:` in the collector's config); the rest comes from the SLO spec."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lanewatch.collector.common.validation import HttpUrl

__all__ = ["GuardConfig"]

RecordSource = Literal["envoy", "litellm", "tap", "probe"]


class GuardConfig(BaseModel):
    """Per-lane TTFT misses, counted at first token or by in-flight age, fired into Alertmanager.

    The thresholds (each lane's TTFT SLO) and the firing ratio (the mitigation error ratio) come
    from the collector's SLO spec (`export.slo_spec`), with the labels of its mitigation alerts
    (a spec without `mitigate` windows: the labels its mitigation rules would have, and 0.5).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    alertmanager_urls: list[HttpUrl] = Field(default_factory=list)  # every instance of an HA pair
    # This collector's name, as the `instance` label of its alerts. Set it (to a unique name each)
    # where several collectors each see a share of a lane's requests (behind Envoy's load balancing,
    # or sharded): each share's alert then stands alone in Alertmanager, and the lane resolves only
    # once every share has. Unset, all guards' alerts are one alert, which the first share to recover
    # resolves while the others still miss.
    instance: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    fire_window_s: float = Field(default=3.0, gt=0, le=300)
    resolve_window_s: float = Field(default=10.0, gt=0, le=3600)
    min_judged: int = Field(default=4, ge=1)  # the evidence floor: requests judged in the window
    min_missed: int = Field(default=3, ge=1)  # ... and of them, missed
    # the missed share above which it fires; null: the spec's mitigation errorRatio (0.5 without one)
    error_ratio: float | None = Field(default=None, gt=0, lt=1)
    # the missed share at or under which a firing lane resolves; null: half the firing ratio
    resolve_ratio: float | None = Field(default=None, ge=0, lt=1)
    resend_s: float = Field(default=5.0, gt=0, le=300)  # re-sent this often while firing
    tick_s: float = Field(default=0.1, gt=0, le=10)  # and at once when a miss arrives
    # Sources judged by their finished records: they report no progress of their own (the gateway,
    # LiteLLM's handler and the collector's prober do). Listing `tap`, `probe` or `litellm` here
    # counts those twice (`litellm` only for a handler whose progress_interval_s is null).
    record_sources: tuple[RecordSource, ...] = ("envoy",)

    @model_validator(mode="after")
    def _consistent(self) -> GuardConfig:
        if self.enabled and not self.alertmanager_urls:
            raise ValueError("guard.enabled needs guard.alertmanager_urls: the guard fires into Alertmanager")
        if self.resolve_window_s < self.fire_window_s:
            raise ValueError("guard.resolve_window_s must be at least guard.fire_window_s")
        if self.min_missed > self.min_judged:
            raise ValueError("guard.min_missed cannot exceed guard.min_judged")
        return self
