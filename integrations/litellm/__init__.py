"""lanewatch inside the LiteLLM proxy: every request it serves becomes a `RequestTiming` of source
`litellm`, shipped to the collector's `POST /v1/records` (docs/routers/litellm.md).

The proxy config names the handler as `lanewatch.integrations.litellm.handler`
(`litellm_settings.callbacks`); it is built on first access from the JSON file that
`LANEWATCH_LITELLM_CONFIG` names. The handler module imports litellm, so it is loaded only then:
the pure parts (settings, records, shipping) import without it.
"""

from __future__ import annotations

from typing import Any

from .records import UNROUTED, record_of
from .settings import CONFIG_ENV, HandlerSettings, load_settings

__all__ = ["CONFIG_ENV", "UNROUTED", "HandlerSettings", "load_settings", "record_of"]

_built: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    """`handler` (the instance a proxy config names) and `LanewatchHandler`, imported on first use."""
    if name == "LanewatchHandler":
        from .handler import LanewatchHandler

        return LanewatchHandler
    if name == "handler":
        if "handler" not in _built:  # one per process: LiteLLM imports the name once per worker
            from .handler import LanewatchHandler

            _built["handler"] = LanewatchHandler(load_settings())
        return _built["handler"]
    raise AttributeError(name)
