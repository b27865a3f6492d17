"""The degrade controller's settings (`degrade:` in the collector's config), each adapter's by its kind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, PlainValidator, SerializeAsAny, field_validator, model_validator

from lanewatch.collector.common.settings import Section, ServerConfig
from lanewatch.collector.common.validation import HttpUrl, check_unique

from .adapters.base import AdapterSettings
from .adapters.registry import REGISTRY

__all__ = ["AdapterEntry", "DegradeConfig", "SharedStoreConfig"]

# One `degrade.adapters` entry: the registry picks its settings class by `kind`.
AdapterEntry = Annotated[SerializeAsAny[AdapterSettings], PlainValidator(lambda v: REGISTRY.parse(v))]


class SharedStoreConfig(Section):
    """A controller pair's shared store (PostgreSQL): state, audit, the leader's lease, the inbox."""

    # libpq connection string or URI, without a password: `postgresql://lanewatch@db:5432/lanewatch`
    url: str = Field(min_length=1)
    password_file: Path | None = None  # the password, from a file (never in the URL or the logs)
    name: str | None = Field(default=None, max_length=200)  # this controller's name; default host:pid
    # Where the other controller and `degrade status` reach this one; default http://host:port.
    advertise_url: HttpUrl | None = None
    # After Kubernetes' leader election: the lease lasts lease_s; the leader stops leading when it
    # could not renew for renew_deadline_s; both try every retry_s.
    lease_s: float = Field(default=6.0, gt=0, le=600)
    renew_deadline_s: float = Field(default=4.0, gt=0, le=600)
    retry_s: float = Field(default=1.0, gt=0, le=60)
    timeout_s: float = Field(default=2.0, gt=0, le=60)  # one call to the store, connecting included
    inbox_max: int = Field(default=10_000, ge=1)  # notifications that may wait for a leader

    @field_validator("url")
    @classmethod
    def _no_password(cls, value: str) -> str:
        from urllib.parse import urlsplit

        scheme = value.split("://", 1)[0] if "://" in value else ""
        if scheme and scheme not in ("postgresql", "postgres"):
            raise ValueError(f"a postgresql:// URL or a libpq connection string, not {scheme}://")
        if (scheme and urlsplit(value).password) or "password=" in value.replace(" ", "").lower():
            raise ValueError("holds a password: give it in password_file instead")
        return value

    @model_validator(mode="after")
    def _times(self) -> SharedStoreConfig:
        if not self.retry_s < self.renew_deadline_s < self.lease_s:
            raise ValueError(
                f"retry_s ({self.retry_s:g}) < renew_deadline_s ({self.renew_deadline_s:g}) "
                f"< lease_s ({self.lease_s:g}) must hold"
            )
        return self


class DegradeConfig(Section):
    """The degrade controller: Alertmanager webhook in, router actions out (collector/degrade/)."""

    server: ServerConfig = ServerConfig(port=9097)
    token_file: Path | None = None  # bearer token Alertmanager must send; required unless insecure_dev
    insecure_dev: bool = False
    state_dir: Path = Path("lanewatch-state")
    # Set: this controller is one of a pair on PostgreSQL (state_dir unused); unset: alone on SQLite.
    shared_store: SharedStoreConfig | None = None
    policy_file: Path | None = None  # None: the built-in default policy (collector/degrade/policy.py)
    # Hysteresis overrides; None keeps the policy's value.
    min_hold_s: float | None = Field(default=None, ge=0)
    recovery_stable_s: float | None = Field(default=None, ge=0)
    escalation_cooldown_s: float | None = Field(default=None, ge=0)
    # The routers to drive, each entry discriminated by `kind` (collector/degrade/adapters/);
    # older configs' flat keys (gateway_url, webhook_url, ...) are folded into entries.
    adapters: list[AdapterEntry] = Field(default_factory=list)
    reconcile_interval_s: float = Field(default=15.0, gt=0)  # re-apply the intended state this often
    # One adapter's apply, all its calls and retries together; past it the apply is cancelled,
    # audited (`adapter_failed`), counted and retried, and no other adapter waits for it.
    apply_timeout_s: float = Field(default=5.0, gt=0, le=600)
    tick_s: float = Field(default=1.0, gt=0)  # how often holds, cooldowns and recoveries are checked
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    # When it acts, the controller diagnoses the alert's lane from this Prometheus into the audit
    # log (docs/degrade.md); the diagnosis runs beside the apply and never delays or fails it.
    prometheus_url: HttpUrl | None = None
    diagnose_window: str = Field(default="5m", pattern=r"^([0-9]+(ms|s|m|h|d|w))+$")
    diagnose_timeout_s: float = Field(default=5.0, gt=0, le=60)

    @model_validator(mode="before")
    @classmethod
    def _flat_adapter_keys(cls, data: Any) -> Any:
        return REGISTRY.upgrade(data) if isinstance(data, dict) else data

    @field_validator("adapters")
    @classmethod
    def _unique_adapters(cls, value: list[AdapterSettings]) -> list[AdapterSettings]:
        check_unique([a.label for a in value], "adapter names (give each entry a `name`)")
        return value
