"""The one configuration model: a YAML file, then `LANEWATCH__` environment overrides.

Every service takes its section from `LanewatchConfig`; defaults work out of the box. Each room
defines its settings in its own `settings` module (probe, collect, gateway, degrade, guard,
diagnose); this module composes them, and checks what spans rooms (targets against the probe's
classes, the ingest's token against what listens).
`load_config` validates everything up front and raises `ConfigError` listing every
problem with its field path and, where YAML gives one, its line: no service ever
starts half-configured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    ValidationError,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from lanewatch.collector.collect.settings import (
    ExportConfig,
    GpuConfig,
    IngestConfig,
    OtlpReceiverConfig,
    ScrapeConfig,
)

# ConfigError and ConfigIssue are what load_config raises: re-exported for its callers.
from lanewatch.collector.common.input_files import ConfigError as ConfigError
from lanewatch.collector.common.input_files import ConfigIssue as ConfigIssue
from lanewatch.collector.common.input_files import read_yaml_mapping, validation_issues
from lanewatch.collector.common.settings import ServerConfig as ServerConfig
from lanewatch.collector.common.validation import check_unique, is_loopback, parse_listen
from lanewatch.collector.degrade.settings import DegradeConfig as DegradeConfig
from lanewatch.collector.diagnose.settings import DiagnoseConfig
from lanewatch.collector.gateway.settings import (
    GatewayConfig,
)
from lanewatch.collector.guard.settings import GuardConfig
from lanewatch.collector.probe.settings import ProbeConfig, Target

ENV_PREFIX = "LANEWATCH__"


class LanewatchConfig(BaseSettings):
    """Everything lanewatch can be told; one file, one model."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    targets: list[Target] = Field(default_factory=list)
    probe: ProbeConfig = ProbeConfig()
    scrape: ScrapeConfig = ScrapeConfig()
    otlp: OtlpReceiverConfig = OtlpReceiverConfig()
    gpu: GpuConfig = GpuConfig()
    ingest: IngestConfig = IngestConfig()
    export: ExportConfig = ExportConfig()
    server: ServerConfig = ServerConfig()
    gateway: GatewayConfig = GatewayConfig()
    degrade: DegradeConfig = DegradeConfig()
    guard: GuardConfig = GuardConfig()  # the fast guard (docs/slo.md#the-fast-guard)
    diagnose: DiagnoseConfig = DiagnoseConfig()  # `lanewatch diagnose`'s thresholds (docs/diagnose.md)

    @model_validator(mode="after")
    def _targets_consistent(self) -> LanewatchConfig:
        check_unique([t.name for t in self.targets], "target names")
        known = {c.name for c in self.probe.classes}
        for t in self.targets:
            unknown = sorted(set(t.classes or ()) - known)
            if unknown:
                raise ValueError(f"target {t.name!r} names unknown request classes {unknown}")
        return self

    @model_validator(mode="after")
    def _ingest_authenticated(self) -> LanewatchConfig:
        problem = ingest_auth_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment overrides win over the file (passed as init kwargs).
        return (env_settings, init_settings)


NEEDS_TOKEN = "needs ingest.token_file (or ingest.reporters)"


def ingest_auth_problem(
    cfg: LanewatchConfig, host: str | None = None, authenticated: bool | None = None
) -> str | None:
    """Why the collector may not run with its ingest open, naming the setting; None when it may.

    Whatever reaches an open ingest path can fire or hide the fast guard's alerts and write any
    record, so a token is needed once the guard is on or a listener (`host`, default server.host;
    otlp.grpc_listen) is reachable beyond loopback. `authenticated` (default: whether `ingest`
    names a token) says whether the ingest asks for one.
    """
    if authenticated is None:
        authenticated = cfg.ingest.authenticated
    if authenticated or not (cfg.ingest.enabled or cfg.otlp.enabled):
        return None
    if cfg.guard.enabled:
        return f"guard.enabled {NEEDS_TOKEN}: else whoever reaches the collector fires or hides alerts"
    host = cfg.server.host if host is None else host
    if not is_loopback(host):
        return f"server.host {host!r} listens beyond loopback and {NEEDS_TOKEN}"
    grpc = cfg.otlp.grpc_listen
    if cfg.otlp.enabled and grpc is not None and not is_loopback(parse_listen(grpc)[0]):
        return f"otlp.grpc_listen {grpc!r} listens beyond loopback and {NEEDS_TOKEN}"
    return None


def load_config(path: Path | None = None) -> LanewatchConfig:
    """Load and validate the config file (if any) with `LANEWATCH__` environment overrides."""
    data: dict[str, Any] = {}
    lines: dict[tuple[str, ...], int] = {}
    if path is not None:
        data, lines = read_yaml_mapping(path)
    try:
        return LanewatchConfig(**data)
    except ValidationError as exc:
        raise ConfigError(str(path) if path else "(defaults)", validation_issues(exc, lines)) from None
