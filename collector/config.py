"""The one configuration model: a YAML file, then `LANEWATCH__` environment overrides.

Every service takes its section from `LanewatchConfig`; defaults work out of the box. A room
with settings of its own defines them in its `settings` module (degrade, diagnose, guard); this
module composes them beside the sections of the collector's own services.
`load_config` validates everything up front and raises `ConfigError` listing every
problem with its field path and, where YAML gives one, its line: no service ever
starts half-configured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from lanewatch.collector.classify.hints import HintsConfig, check_prompt_regex
from lanewatch.collector.classify.rules import DEFAULT_CLASS_RULES, ClassRule, ReadingConfig
from lanewatch.collector.common.headers import CLASS_HEADER
from lanewatch.collector.common.listen import is_loopback, parse_listen
from lanewatch.collector.common.settings import Section
from lanewatch.collector.common.settings import ServerConfig as ServerConfig
from lanewatch.collector.common.validation import ClassName, HttpUrl, LaneName, check_unique

# ConfigError and ConfigIssue are what load_config raises: re-exported for its callers.
from lanewatch.collector.common.yamlfile import ConfigError as ConfigError
from lanewatch.collector.common.yamlfile import ConfigIssue as ConfigIssue
from lanewatch.collector.common.yamlfile import read_yaml_mapping, validation_issues
from lanewatch.collector.degrade.settings import DegradeConfig as DegradeConfig
from lanewatch.collector.degrade_state.served_models import ServedModels
from lanewatch.collector.diagnose.settings import DiagnoseConfig
from lanewatch.collector.guard.settings import GuardConfig

ENV_PREFIX = "LANEWATCH__"


class RequestClass(Section):
    """A kind of request the prober sends; prompts are deterministic."""

    name: ClassName
    description: str = ""
    api: Literal["chat", "completions"] = "chat"
    prompt: str | None = None  # exact text; when None, `prompt_words` deterministic words
    prompt_words: int = Field(default=8, ge=1, le=200_000)
    max_tokens: int = Field(default=16, ge=1, le=1_000_000)
    ignore_eos: bool = True  # generate exactly max_tokens, so the work per class is fixed


DEFAULT_CLASSES: tuple[RequestClass, ...] = (
    RequestClass(name="short", description="a short question", prompt_words=12, max_tokens=16),
    RequestClass(name="summary", description="summarize a long input", prompt_words=1500, max_tokens=64),
    RequestClass(name="story", description="write a long answer", prompt_words=24, max_tokens=256),
)


class Target(Section):
    """One OpenAI-compatible endpoint (vLLM, the simulator or a gateway) to probe and scrape."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    url: HttpUrl  # base URL, e.g. https://127.0.0.1:8001
    lane: LaneName = "default"
    model: str
    api: Literal["chat", "completions"] = "chat"
    classes: list[ClassName] | None = None  # request classes to probe; None = all
    metrics_url: HttpUrl | None = None  # vLLM /metrics; None = url + "/metrics"
    scrape: bool = True
    cacert: Path | None = None
    insecure: bool = False  # skip TLS verification (-k)
    api_key_file: Path | None = None  # read at start; the key never reaches logs or labels

    @property
    def scrape_url(self) -> str:
        """The /metrics URL to scrape."""
        return self.metrics_url or f"{self.url}/metrics"


class Timeouts(Section):
    """Per-phase limits for one probe, in seconds."""

    connect_s: float = Field(default=5.0, gt=0)
    ttft_s: float = Field(default=30.0, gt=0)
    stall_s: float = Field(default=10.0, gt=0)  # longest allowed gap between chunks
    total_s: float = Field(default=120.0, gt=0)


class ProbeConfig(Section):
    """The active prober: synthetic canaries per target and request class."""

    enabled: bool = True
    interval_s: float = Field(default=10.0, gt=0)
    jitter_ratio: float = Field(default=0.2, ge=0, lt=1)
    concurrency: int = Field(default=4, ge=1, le=1024)
    # Probes of one (target, class) in flight at once. 1: a turn that comes while the last probe
    # still runs is skipped. Behind a router that reports nothing per request (nginx), the fast
    # guard's only evidence is the probes, and on a lane whose answers take longer than the
    # interval, skipped turns starve it: allow a few more (`concurrency` still caps them all).
    # The extra ones run only while every probe of the job still waits for its first token: a
    # lane that answers gets one long probe at a time, as with 1.
    overlap: int = Field(default=1, ge=1, le=64)
    connection: Literal["warm", "cold"] = "warm"
    timeouts: Timeouts = Timeouts()
    classes: list[RequestClass] = Field(default_factory=lambda: list(DEFAULT_CLASSES))
    shard: str | None = Field(default=None, pattern=r"^\d+/\d+$")  # "i/N": probe a stable share

    @model_validator(mode="after")
    def _unique_classes(self) -> ProbeConfig:
        check_unique([c.name for c in self.classes], "request class names")
        return self


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


class LaneConfig(Section, ServedModels):
    """A gateway lane: a pool of upstreams serving one tier, and its models (`ServedModels`)."""

    upstreams: list[HttpUrl] = Field(min_length=1)  # base URLs, e.g. http://10.0.0.5:8000
    cacert: Path | None = None
    insecure: bool = False  # skip TLS verification (-k)
    api_key_file: Path | None = None  # sent upstream as the bearer token; never logged


class RegexRoute(Section):
    """Send a request whose last user message matches `pattern` (RE2 search, linear time) to `lane`."""

    pattern: str
    lane: LaneName

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return check_prompt_regex(value)


class RangeRoute(Section):
    """Send a request whose measure lies in [min, max] (both inclusive, either open) to `lane`."""

    lane: LaneName
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounded(self) -> RangeRoute:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        return self


class RoutingRules(Section):
    """Routing rules, tried in this order after the lane header; the first match picks the lane."""

    models: dict[str, LaneName] = Field(default_factory=dict)  # exact model name -> lane
    message_regex: list[RegexRoute] = Field(default_factory=list)
    prompt_chars: list[RangeRoute] = Field(default_factory=list)  # characters of all prompt text
    # over the work: max_tokens / max_completion_tokens x n (or best_of) x prompts
    # (openai_api/request_reading.py)
    max_tokens: list[RangeRoute] = Field(default_factory=list)

    def lanes_named(self) -> list[str]:
        """Every lane a rule names."""
        ranges = [*self.prompt_chars, *self.max_tokens]
        return [*self.models.values(), *(r.lane for r in self.message_regex), *(r.lane for r in ranges)]


class ShippingConfig(Section):
    """How the gateway's tap ships its records to the collector (gateway.collector_url)."""

    batch_records: int = Field(default=256, ge=1, le=100_000)  # a batch goes out at this many
    batch_bytes: int = Field(default=1024 * 1024, ge=1024)  # or at this much JSON (DEFAULT_BATCH_BYTES)
    interval_s: float = Field(default=1.0, gt=0)  # or this long after the last send
    queue_records: int = Field(default=20_000, ge=1)  # held while the collector is slow; then the oldest go
    timeout_s: float = Field(default=5.0, gt=0)  # one send
    retry_initial_s: float = Field(default=0.2, gt=0)  # backoff after a failed send, doubling
    retry_max_s: float = Field(default=10.0, gt=0)
    shutdown_s: float = Field(default=5.0, ge=0)  # at exit, how long to try to send what is queued
    # Requests under way reported to the collector's fast guard (POST /v1/progress) this often;
    # null turns it off. Each report is one small body: first tokens and waiting requests' ages.
    progress_interval_s: float | None = Field(default=0.1, gt=0, le=10)


class ModelDiscoveryConfig(Section):
    """How a lane that declares no models learns them from its upstreams' `GET /v1/models`."""

    enabled: bool = True
    interval_s: float = Field(default=60.0, gt=0)  # asked at start, then this often
    timeout_s: float = Field(default=5.0, gt=0)  # one upstream's whole answer
    max_bytes: int = Field(default=256 * 1024, ge=1024)  # a longer answer is refused
    max_models: int = Field(default=32, ge=1, le=1000)  # kept per lane (each is a metric series)


MAX_WORKERS = 256  # gateway.workers


class GatewayConfig(Section):
    """The lane router and passive tap (collector/gateway/)."""

    server: ServerConfig = ServerConfig(port=8080)
    lanes: dict[LaneName, LaneConfig] = Field(default_factory=dict)
    lane_order: list[LaneName] = Field(default_factory=list)  # fastest first; default: as listed
    default_lane: LaneName | None = None  # default: the last (slowest) lane of lane_order
    rules: RoutingRules = RoutingRules()
    admin_token_file: Path | None = None  # bearer token for /admin/degrade; without it the API is off
    admin_insecure: bool = False  # serve /admin/degrade without a token (development only)
    # The request class shedding acts on: the first of `classes` a request matches, else
    # default_class; the class_header and the lane header count only from `hints` (default: nobody).
    class_header: str = CLASS_HEADER
    default_class: ClassName = "interactive"
    classes: list[ClassRule] = Field(default_factory=lambda: list(DEFAULT_CLASS_RULES))
    hints: HintsConfig = HintsConfig()
    reading: ReadingConfig = ReadingConfig()  # missing max_tokens, token-id prompts, regex bound
    shift_mode: Literal["spread", "random"] = "spread"  # spread: exactly N% evenly; random: seeded draw
    shift_seed: int = 0
    shed_retry_after_s: int = Field(default=30, ge=1)
    health_path: str = "/health"
    health_interval_s: float = Field(default=2.0, gt=0)
    eject_after_failures: int = Field(default=3, ge=1)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    read_timeout_s: float = Field(default=300.0, gt=0)  # longest wait for the next upstream bytes
    max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    # Client connections: a request head must be complete within head_timeout_s of its first byte
    # (of the connection, for the first request); an idle keep-alive connection closes after
    # keepalive_timeout_s; past max_connections open at once a new one is answered 503 and closed
    # (None: half the process's open-file limit less 64, at most 10,000).
    head_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    keepalive_timeout_s: float = Field(default=75.0, gt=0, le=3600)
    max_connections: int | None = Field(default=None, ge=1, le=1_000_000)
    otlp_endpoint: HttpUrl | None = None  # OTLP/HTTP traces URL for the per-request server span
    # Ship tap records to this collector (base URL; POST /v1/records), which joins them to vLLM's
    # spans and exports them; the gateway then exports no request metrics itself.
    collector_url: HttpUrl | None = None
    collector_token_file: Path | None = None  # bearer token for the collector's ingest
    # The progress reports' reporter ids start `<reporter_name>-`: the name of the collector's
    # ingest.reporters entry whose token collector_token_file holds.
    reporter_name: str = Field(default="gw", pattern=r"^[A-Za-z0-9._-]{1,16}$")
    shipping: ShippingConfig = ShippingConfig()
    model_discovery: ModelDiscoveryConfig = ModelDiscoveryConfig()
    # Processes accepting on the one port (docs/gateway.md#workers); "auto": the cores this process
    # may run on. At SIGTERM each stops accepting and gives open requests drain_timeout_s to finish.
    workers: int | Literal["auto"] = 1
    drain_timeout_s: float = Field(default=10.0, ge=0, le=3600)

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: object) -> int | str:
        # One clear message instead of one per member of the union.
        if value == "auto":
            return "auto"
        if isinstance(value, str) and value.isdecimal() and value.isascii():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WORKERS:
            raise ValueError(f"must be a whole number from 1 to {MAX_WORKERS}, or 'auto'; got {value!r}")
        return value

    @field_validator("collector_url")
    @classmethod
    def _collector_url(cls, value: str | None) -> str | None:
        # A base URL: the ingest path is appended by the shipper, so a full endpoint is cut back.
        return None if value is None else value.removesuffix("/v1/records")

    @model_validator(mode="after")
    def _lanes_known(self) -> GatewayConfig:
        known = set(self.lanes)
        named = [*self.lane_order, *self.rules.lanes_named()]
        if self.default_lane:
            named.append(self.default_lane)
        unknown = sorted({n for n in named if n not in known})
        if known and unknown:
            raise ValueError(f"unknown lanes {unknown}; configured lanes: {sorted(known)}")
        if self.lane_order and sorted(self.lane_order) != sorted(known):
            raise ValueError(f"lane_order {self.lane_order} must list each lane {sorted(known)} once")
        return self

    @property
    def class_names(self) -> frozenset[str]:
        """Every class a request can be given: the default, the rules' and the hint classes."""
        return frozenset({self.default_class, *(r.name for r in self.classes), *self.hints.classes})

    @property
    def ordered_lanes(self) -> list[str]:
        """Lane names, fastest first."""
        return list(self.lane_order) or list(self.lanes)

    @property
    def effective_default_lane(self) -> str | None:
        """The lane a request no rule matched goes to."""
        order = self.ordered_lanes
        return self.default_lane or (order[-1] if order else None)


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
