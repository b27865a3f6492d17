"""The handler's settings: one JSON file (stdlib only, so it reads in LiteLLM's own environment)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    request_class: str = "other"  # LiteLLM knows no lanewatch classes: one label for every record
    queue_records: int = 10_000  # the bound: past it the oldest record is dropped, and counted
    batch_records: int = 200
    interval_s: float = 1.0
    timeout_s: float = 5.0
    retry_max_s: float = 30.0

    def token(self) -> str | None:
        """The ingest token, read from its file (None without one)."""
        return self.token_file.read_text(encoding="utf-8").strip() if self.token_file else None


def settings_from(data: Mapping[str, Any]) -> HandlerSettings:
    """Settings from a parsed JSON object; ValueError naming an unknown key or a bad bound."""
    known = set(HandlerSettings.__dataclass_fields__)
    if unknown := sorted(set(data) - known):
        raise ValueError(f"unknown lanewatch LiteLLM setting(s): {', '.join(unknown)}")
    kwargs = dict(data)
    if kwargs.get("token_file") is not None:
        kwargs["token_file"] = Path(kwargs["token_file"])
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
