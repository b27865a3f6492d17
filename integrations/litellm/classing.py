"""A request's class in the handler: the operator's class rules over the body, as the gateway's.

The class is what a shed acts on and what the request's record is labelled with, so the client
does not choose it: the rules (`classes`, shared with the gateway in classify/rules.py) read
the body as vLLM does, and the class header counts only when the settings trust it
(`trust_class_header`, for a proxy behind a hop that sets the header itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lanewatch.collector.classify.rules import class_of, measure
from lanewatch.collector.openai_api.request_reading import ReadingError
from lanewatch.collector.record.timing import Api

from .settings import HandlerSettings

__all__ = ["header_class", "request_class"]


def header_class(headers: Mapping[str, Any] | None, header: str) -> str | None:
    """The value of the class header `header` (any case) in `headers`, else None."""
    name = header.lower()
    for key, value in (headers or {}).items():
        if isinstance(key, str) and key.lower() == name and isinstance(value, str) and value.strip():
            return value.strip().lower()
    return None


def request_class(
    settings: HandlerSettings, body: Mapping[str, Any] | None, headers: Mapping[str, Any] | None, api: Api
) -> str:
    """The class of a chat or completions request: a trusted class header, else the first class
    rule the body matches (its work: max_tokens x `n` or `best_of` x prompts), else `default_class`."""
    if settings.trust_class_header and (hinted := header_class(headers, settings.class_header)):
        return hinted
    try:
        m = measure(body or {}, api, settings.reading)
    except ReadingError:  # a bound or prompt vLLM refuses with a 400: it costs the lane nothing
        return settings.default_class
    return class_of(settings.classes, settings.default_class, api, m.model, m.work, m.prompt_chars)
