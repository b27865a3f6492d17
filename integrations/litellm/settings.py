"""The handler's settings: one JSON file (the stdlib and lanewatch's common modules only, so it
reads in LiteLLM's own environment)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanewatch.collector.common.class_rules import (
    DEFAULT_CLASS_RULES,
    ClassRule,
    ReadingConfig,
    parse_class_rules,
)
from lanewatch.collector.common.names import check_class_name

__all__ = ["CONFIG_ENV", "HandlerSettings", "load_settings"]

CONFIG_ENV = "LANEWATCH_LITELLM_CONFIG"


@dataclass(frozen=True, slots=True)
class HandlerSettings:
    """Where records go and how each request is labelled."""

    collector_url: str | None = None  # base URL; None: records are built and counted, not shipped
    token_file: Path | None = None  # the collector's ingest.token_file, sent as a bearer token
    target: str = "litellm"
    # model group (or deployment id) -> lane; anything else is `unrouted`
    lanes: Mapping[str, str] = field(default_factory=dict)
    # A request's class, as the gateway's `gateway.classes`: the first rule it matches, else
    # default_class; the rules read the body as vLLM does, as `reading` says (gateway.reading).
    classes: tuple[ClassRule, ...] = DEFAULT_CLASS_RULES
    default_class: str = "interactive"
    reading: ReadingConfig = field(default_factory=ReadingConfig)
    # The client's class hint (the gateway's default header name): ignored unless trusted, so a
    # client cannot leave a shed class by naming another; trust it only behind a hop that sets it.
    class_header: str = "x-lanewatch-class"
    trust_class_header: bool = False
    queue_records: int = 10_000  # the bound: past it the oldest record is dropped, and counted
    batch_records: int = 200
    interval_s: float = 1.0
    timeout_s: float = 5.0
    retry_max_s: float = 30.0
    # degrade: the state endpoint the controller's `litellm` adapter PUTs to (None: no degrade)
    admin_host: str = "127.0.0.1"
    admin_port: int | None = None  # 0: any free port (tests)
    admin_token_file: Path | None = None  # the bearer token the adapter sends
    lane_order: tuple[str, ...] = ()  # fastest first; default: the lanes in the order `lanes` names them
    lane_groups: Mapping[str, str] = field(default_factory=dict)  # lane -> the model group a shift sends
    shed_retry_after_s: int = 1

    def order(self) -> tuple[str, ...]:
        """The lanes, fastest first."""
        return self.lane_order or tuple(dict.fromkeys(self.lanes.values()))

    def groups(self) -> dict[str, str]:
        """Lane -> the model group a shift to it sends: declared, else the first group of that lane."""
        out: dict[str, str] = {}
        for group, lane in self.lanes.items():
            out.setdefault(lane, group)
        return out | dict(self.lane_groups)

    def token(self) -> str | None:
        """The ingest token, read from its file (None without one)."""
        return _read(self.token_file)

    def admin_token(self) -> str | None:
        """The admin endpoint's token, read from its file (None without one)."""
        return _read(self.admin_token_file)


def _read(path: Path | None) -> str | None:
    return path.read_text(encoding="utf-8").strip() if path else None


def settings_from(data: Mapping[str, Any]) -> HandlerSettings:
    """Settings from a parsed JSON object; ValueError naming an unknown key or a bad bound."""
    known = set(HandlerSettings.__dataclass_fields__)
    if unknown := sorted(set(data) - known):
        raise ValueError(f"unknown lanewatch LiteLLM setting(s): {', '.join(unknown)}")
    kwargs = dict(data)
    for key in ("token_file", "admin_token_file"):
        if kwargs.get(key) is not None:
            kwargs[key] = Path(kwargs[key])
    kwargs["lane_order"] = tuple(kwargs.get("lane_order", ()))
    if "classes" in kwargs:
        kwargs["classes"] = parse_class_rules(kwargs["classes"])
    if "reading" in kwargs:
        kwargs["reading"] = ReadingConfig.model_validate(kwargs["reading"])
    if "default_class" in kwargs:
        kwargs["default_class"] = check_class_name(kwargs["default_class"])
    if not isinstance(kwargs.get("trust_class_header", False), bool):
        raise ValueError("trust_class_header: true or false")
    lanes = kwargs.get("lanes", {})
    if not isinstance(lanes, Mapping) or not all(isinstance(v, str) for v in lanes.values()):
        raise ValueError("lanes: an object of model group -> lane name")
    out = HandlerSettings(**kwargs)
    if min(out.queue_records, out.batch_records) < 1 or min(out.interval_s, out.timeout_s) <= 0:
        raise ValueError("queue_records, batch_records, interval_s and timeout_s must be positive")
    return out


def load_settings(environ: Mapping[str, str] = os.environ) -> HandlerSettings:
    """The settings from the file `LANEWATCH_LITELLM_CONFIG` names (defaults without one)."""
    path = environ.get(CONFIG_ENV)
    if not path:
        return HandlerSettings()
    return settings_from(json.loads(Path(path).read_text(encoding="utf-8")))
