"""The prober's settings (`targets`, `probe` in the one config): request classes, targets, timeouts."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

# ConfigError and ConfigIssue are what load_config raises: re-exported for its callers.
from lanewatch.collector.common.input_files import ConfigError as ConfigError
from lanewatch.collector.common.input_files import ConfigIssue as ConfigIssue
from lanewatch.collector.common.settings import Section
from lanewatch.collector.common.settings import ServerConfig as ServerConfig
from lanewatch.collector.common.validation import ClassName, HttpUrl, LaneName, check_unique
from lanewatch.collector.degrade.settings import DegradeConfig as DegradeConfig


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
