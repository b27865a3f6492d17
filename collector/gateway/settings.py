"""The gateway's settings (`gateway` in the one config): lanes, routes, classes, shipping, workers."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from lanewatch.collector.classify.hints import HintsConfig, check_prompt_regex
from lanewatch.collector.classify.rules import DEFAULT_CLASS_RULES, ClassRule, ReadingConfig
from lanewatch.collector.common.headers import CLASS_HEADER

# ConfigError and ConfigIssue are what load_config raises: re-exported for its callers.
from lanewatch.collector.common.input_files import ConfigError as ConfigError
from lanewatch.collector.common.input_files import ConfigIssue as ConfigIssue
from lanewatch.collector.common.settings import Section
from lanewatch.collector.common.settings import ServerConfig as ServerConfig
from lanewatch.collector.common.validation import ClassName, HttpUrl, LaneName
from lanewatch.collector.degrade.settings import DegradeConfig as DegradeConfig
from lanewatch.collector.degrade_state.served_models import ServedModels


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


class RescueDeadline(Section):
    """A rescue deadline set by hand: `lane`'s requests (of `request_class` only, when given) are
    rescued once they waited `after_s` for a first token, instead of the deadline the SLO gives."""

    lane: LaneName
    request_class: ClassName | None = None
    after_s: float = Field(gt=0, le=3600)


class RescueConfig(Section):
    """The rescue of a late request (docs/gateway.md#rescue): a streamed request whose first token
    is late is sent again to a faster lane, and the first to answer wins."""

    enabled: bool = True
    # lane -> the lane its late requests go to; a lane not listed: the next faster in lane_order
    targets: dict[LaneName, LaneName] = Field(default_factory=dict)
    exclude_classes: list[ClassName] = Field(default_factory=lambda: ["batch"])
    # The throttle, after gRPC's retryThrottling: a bucket per target lane holds up to max_tokens;
    # each request of a lane that rescues into it adds token_ratio, each rescue takes one. Size
    # max_tokens to the rescues a breach needs before the guard's shift: the lane's streamed
    # requests over about 5 s.
    max_tokens: float = Field(default=20.0, ge=1, le=10_000)
    token_ratio: float = Field(default=0.05, gt=0, le=1)
    # The deadline: the lane's TTFT SLO less the target's recent TTFT (p90) less margin_s, and
    # never under floor_ratio of the SLO; `deadlines` set it by hand per lane and class.
    margin_s: float = Field(default=0.25, ge=0, le=60)
    floor_ratio: float = Field(default=0.25, gt=0, le=1)
    deadlines: list[RescueDeadline] = Field(default_factory=list)


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
    rescue: RescueConfig = RescueConfig()

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
        named += [
            *self.rescue.targets,
            *self.rescue.targets.values(),
            *(d.lane for d in self.rescue.deadlines),
        ]
        if self.default_lane:
            named.append(self.default_lane)
        unknown = sorted({n for n in named if n not in known})
        if known and unknown:
            raise ValueError(f"unknown lanes {unknown}; configured lanes: {sorted(known)}")
        if self.lane_order and sorted(self.lane_order) != sorted(known):
            raise ValueError(f"lane_order {self.lane_order} must list each lane {sorted(known)} once")
        looped = sorted(lane for lane, target in self.rescue.targets.items() if lane == target)
        if looped:
            raise ValueError(f"rescue.targets: lanes {looped} would be rescued into themselves")
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
