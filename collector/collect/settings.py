"""The collect service's settings (`scrape`, `otlp`, `ingest`, `gpu`, `export` in the one config)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

# ConfigError and ConfigIssue are what load_config raises: re-exported for its callers.
from lanewatch.collector.common.input_files import ConfigError as ConfigError
from lanewatch.collector.common.input_files import ConfigIssue as ConfigIssue
from lanewatch.collector.common.settings import Section
from lanewatch.collector.common.settings import ServerConfig as ServerConfig
from lanewatch.collector.common.validation import ClassName, HttpUrl, LaneName, check_unique, parse_listen
from lanewatch.collector.degrade.settings import DegradeConfig as DegradeConfig


class ScrapeConfig(Section):
    """Scraping vLLM's /metrics on each target."""

    enabled: bool = True
    interval_s: float = Field(default=5.0, gt=0)
    timeout_s: float = Field(default=3.0, gt=0)
    window_s: float = Field(default=300.0, gt=0)


class OtlpReceiverConfig(Section):
    """The OTLP receivers of vLLM's `llm_request` spans (HTTP; gRPC given an address), joined by trace id."""

    enabled: bool = True
    join_wait_s: float = Field(default=5.0, ge=0)  # how long a record waits for its span
    max_pending: int = Field(default=10_000, ge=1)  # bound on records and spans held
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)  # HTTP body and gRPC message limit
    # llm_request spans taken from one POST (vLLM's exporter sends 512 at most by default)
    max_spans_per_request: int = Field(default=2048, ge=1)
    # OTLP logs (Envoy's access-log entries, docs/envoy-tap.md): POST /v1/logs, and LogsService/Export
    # on the gRPC listener; each entry becomes a record of source `envoy`
    logs: bool = True
    max_log_records_per_request: int = Field(default=2048, ge=1)
    envoy_default_class: ClassName = "interactive"  # of an entry whose request_class is absent or bad
    # OTLP/gRPC (vLLM's default protocol) on a port of its own, `[HOST:]PORT` (4317 by convention);
    # None: HTTP only. Host defaults to 127.0.0.1.
    grpc_listen: str | None = None
    # Export calls served at once; more get RESOURCE_EXHAUSTED
    grpc_max_concurrent: int = Field(default=16, ge=1)
    # of those, the calls one connection may have open at once (HTTP/2 max concurrent streams)
    grpc_streams_per_connection: int = Field(default=4, ge=1)
    # from a call's start until its whole message has arrived; then DEADLINE_EXCEEDED
    grpc_read_timeout_s: float = Field(default=10.0, gt=0)
    # a connection is closed (GOAWAY, calls in flight get 10 s) after this long; senders reconnect
    grpc_max_connection_age_s: float = Field(default=300.0, ge=1)

    @field_validator("grpc_listen")
    @classmethod
    def _listen(cls, value: str | None) -> str | None:
        if value is not None:
            parse_listen(value)  # ValueError names the expected form
        return value


# What a reporter's credential may feed the collector (OTLP spans: any credential): `progress`,
# POST /v1/progress; a record source, its records on POST /v1/records (`envoy`: also OTLP access logs).
Feed = Literal["progress", "tap", "litellm", "envoy", "probe"]
REPORTER_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,32}$"


class ReporterCredential(Section):
    """One reporter's own bearer token: it speaks for reporters named `name` or `name-...` only."""

    name: str = Field(pattern=REPORTER_NAME_PATTERN)
    token_file: Path  # read at start; the token never reaches logs, labels or spans
    feeds: list[Feed]  # what it may send; e.g. a gateway [progress, tap], Envoy [envoy], vLLM []


class IngestConfig(Section):
    """`POST /v1/records` and `/v1/progress`: what sources in other processes send, and who may send it.

    With `token_file` or `reporters` every ingest path (records, progress, OTLP/HTTP and gRPC)
    asks for a bearer token; without either it is open, which only a collector on loopback
    with the guard off may be (`ingest_auth_problem`).
    """

    enabled: bool = True
    # The shared token: one credential that speaks for every reporter and feeds everything.
    token_file: Path | None = None
    reporters: list[ReporterCredential] = Field(default_factory=list)  # one credential per reporter
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    max_records: int = Field(default=10_000, ge=1)  # per batch
    # record_ids remembered: a record sent again (a batch retried) is acknowledged, not taken twice
    recent_record_ids: int = Field(default=65_536, ge=0)

    @model_validator(mode="after")
    def _reporters_apart(self) -> IngestConfig:
        names = [r.name for r in self.reporters]
        check_unique(names, "ingest.reporters names")
        for a in names:
            for b in names:
                if b.startswith(a + "-"):  # `a` would speak for `b`'s reporters too
                    raise ValueError(f"ingest.reporters: {a!r} is a prefix of {b!r}; name them apart")
        return self

    @property
    def authenticated(self) -> bool:
        """Whether senders must present a token."""
        return self.token_file is not None or bool(self.reporters)


class GpuConfig(Section):
    """NVML sampling; without a driver it logs once and exports nothing."""

    enabled: bool = True
    interval_s: float = Field(default=5.0, gt=0)


class ExportConfig(Section):
    """Where records go besides /metrics."""

    otlp_endpoint: HttpUrl | None = None  # OTLP/HTTP traces endpoint for probe spans
    records_path: Path | None = None  # JSONL, one RequestTiming per line
    record_content: bool = False  # prompt and response text stay out unless turned on
    max_label_values: int = Field(default=200, ge=1)  # per label; then OVERFLOW_VALUE
    # Series (sample lines) the request metrics may expose, in all and per family; new label
    # sets past either fold into OVERFLOW_VALUE. 10,000 keeps /metrics near 1.5 MB.
    max_series: int = Field(default=10_000, ge=100)
    max_series_per_family: int = Field(default=4_000, ge=100)
    # Closed label sets: a lane or request class outside them is counted as `other`, and each lane
    # keeps a reserve of the series budget. Lanes: these, the gateway's, the targets' and the SLO
    # spec's. Classes: these, the probe's and the gateway's (default class, rules, hint classes);
    # null: classes open, bounded by max_label_values and the budget alone.
    lanes: list[LaneName] = Field(default_factory=list)
    request_classes: list[ClassName] | None = Field(default_factory=lambda: ["interactive", "batch"])
    window_s: float = Field(default=300.0, gt=0)  # rolling window for quantiles and fits
    # Goodput (lanewatch_goodput_requests_total): each request judged against the latency SLOs of
    # this SLO spec (default: the bundled alerts/slos.yaml, whose rules read the counter).
    goodput: bool = True
    slo_spec: Path | None = None
