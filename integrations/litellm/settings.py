"""The handler's settings: one JSON file (the stdlib and lanewatch's common modules only, so it
reads in LiteLLM's own environment)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanewatch.collector.classify.rules import (
    DEFAULT_CLASS_RULES,
    ClassRule,
    ReadingConfig,
    parse_class_rules,
)
from lanewatch.collector.common.validation import check_class_name

__all__ = ["CONFIG_ENV", "HandlerSettings", "load_settings"]

CONFIG_ENV = "LANEWATCH_LITELLM_CONFIG"
_REPORTER_NAME = re.compile(r"^[A-Za-z0-9._-]{1,16}$")  # as the gateway's reporter_name


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
    # Each streamed request's wait, reported to the collector's fast guard (`POST /v1/progress`) this
    # often while it waits, with the token above (None: no reports, and the guard judges no LiteLLM
    # request unless `guard.record_sources` lists `litellm`).
    progress_interval_s: float | None = 0.1
    # Its reports' reporter ids start `<reporter_name>-`: the name of the collector's
    # `ingest.reporters` credential whose token `token_file` holds, when the collector gives each its own.
    reporter_name: str = "litellm"
    progress_max_flights: int = 10_000  # streamed requests tracked at once; past it one is not reported
    progress_max_age_s: float = 300.0  # a request tracked longer than this is dropped unseen
    # degrade: the state endpoint the controller's `litellm` adapter PUTs to (None: no degrade)
    admin_host: str = "127.0.0.1"
    admin_port: int | None = None  # 0: any free port (tests)
    admin_token_file: Path | None = None  # the bearer token the adapter sends
    admin_timeout_s: float = 5.0  # a connection's budget per read and write: a silent one is closed
    admin_max_connections: int = 16  # connections served at once; one more is closed unanswered
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
    _check_bounds(out)
    return out


def _check_bounds(out: HandlerSettings) -> None:
    """ValueError naming the first setting out of its bounds."""
    interval = out.progress_interval_s
    if interval is not None and not (_number(interval) and 0 < interval <= 10):
        raise ValueError("progress_interval_s: null, or seconds in (0, 10]")
    if not (isinstance(out.reporter_name, str) and _REPORTER_NAME.match(out.reporter_name)):
        raise ValueError("reporter_name: 1-16 characters of A-Z a-z 0-9 . _ -")
    if not (_whole(out.progress_max_flights) and out.progress_max_flights >= 1):
        raise ValueError("progress_max_flights: a whole number of at least 1")
    if not (_number(out.progress_max_age_s) and 1 <= out.progress_max_age_s <= 600):
        raise ValueError("progress_max_age_s: seconds in [1, 600] (the guard forgets a request after 600)")
    if not (_number(out.admin_timeout_s) and 0 < out.admin_timeout_s <= 300):
        raise ValueError("admin_timeout_s: seconds in (0, 300]")
    if not (_whole(out.admin_max_connections) and 1 <= out.admin_max_connections <= 1024):
        raise ValueError("admin_max_connections: a whole number in [1, 1024]")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def load_settings(environ: Mapping[str, str] = os.environ) -> HandlerSettings:
    """The settings from the file `LANEWATCH_LITELLM_CONFIG` names (defaults without one)."""
    path = environ.get(CONFIG_ENV)
    if not path:
        return HandlerSettings()
    return settings_from(json.loads(Path(path).read_text(encoding="utf-8")))
