"""Alertmanager's webhook body (version 4), validated strictly.

Field names and shapes follow Alertmanager 0.25's webhook_config payload (version "4"; the bodies
captured from a real Alertmanager are in tests/fixtures/). Wrong types and missing fields are errors, refused
with a reason. Fields this version does not know are ignored: Alertmanager does not retry a
4xx, so refusing a field a newer release adds would silently drop every alert.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from lanewatch.collector.common.errors import ProtocolViolation

__all__ = ["Alert", "Notification", "WebhookError", "parse_notification"]

Labels = dict[str, Annotated[str, Field(max_length=4096)]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class Alert(_Strict):
    """One alert in a notification; `fingerprint` identifies it across notifications."""

    status: Literal["firing", "resolved"]
    labels: Labels
    annotations: Labels
    starts_at: AwareDatetime = Field(alias="startsAt")
    ends_at: AwareDatetime = Field(alias="endsAt")  # 0001-01-01T00:00:00Z while firing
    generator_url: str = Field(alias="generatorURL", max_length=8192)
    fingerprint: str = Field(pattern=r"^[0-9a-f]{16}$")  # Alertmanager writes %016x


class Notification(_Strict):
    """One webhook notification: a group of alerts sharing `groupLabels`."""

    version: Literal["4"]
    group_key: str = Field(alias="groupKey", max_length=16384)
    truncated_alerts: int = Field(alias="truncatedAlerts", ge=0)
    status: Literal["firing", "resolved"]
    receiver: str = Field(max_length=1024)
    group_labels: Labels = Field(alias="groupLabels")
    common_labels: Labels = Field(alias="commonLabels")
    common_annotations: Labels = Field(alias="commonAnnotations")
    external_url: str = Field(alias="externalURL", max_length=8192)
    alerts: list[Alert] = Field(min_length=1, max_length=10_000)


class WebhookError(ProtocolViolation, ValueError):
    """A body that is not a valid Alertmanager version-4 notification; `reasons` name each field."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("; ".join(reasons))


def parse_notification(body: bytes) -> Notification:
    """Parse and validate a webhook body; raise WebhookError naming every bad field."""
    try:
        return Notification.model_validate_json(body)
    except ValidationError as exc:
        raise WebhookError(_reasons(exc)) from None


def _reasons(exc: ValidationError, limit: int = 20) -> list[str]:
    # Only the location and message: never echo the input, which may be large or sensitive.
    out = []
    for err in exc.errors()[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "(body)"
        out.append(f"{where}: {err['msg']}")
    if exc.error_count() > limit:
        out.append(f"... and {exc.error_count() - limit} more")
    return out
