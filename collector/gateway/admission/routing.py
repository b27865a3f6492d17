"""Which lane a request goes to: pure rules over what the request body and headers say.

Order (first match wins): the `x-lanewatch-lane` header (read only from a client
`gateway.hints` trusts, classify.py), the model-name map, a regex on
the last user message (RE2, linear time, over its first `reading.regex_max_chars` characters),
prompt length in characters (a token id counts `reading.chars_per_token`), max_tokens over the
work (the bound vLLM reads, unset: `reading.missing_max_tokens`, x `n` or `best_of` x prompts:
openai_api/request_reading.py); then the lane that
owns the requested model when that is not the default lane (declared there, or listed there
first: model_ownership.py); then the default lane.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import re2  # type: ignore[import-untyped]

from lanewatch.collector.classify.rules import ReadingConfig, measure
from lanewatch.collector.common.errors import ProtocolViolation
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.openai_api.request_reading import ReadApi

from .lane_models import LaneModels

__all__ = ["RouteError", "RouteInput", "RouteTable", "Routed", "choose_lane", "route_input"]


class RouteError(ProtocolViolation, ValueError):
    """The request names a lane that does not exist (a 400 for the client)."""


@dataclass(frozen=True, slots=True)
class RouteInput:
    """What routing looks at in one request; nothing else of the body is kept."""

    header_lane: str | None = None
    model: str | None = None
    last_user_message: str | None = None  # cut to reading.regex_max_chars
    prompt_chars: int = 0  # text characters + chars_per_token per token id
    # the work: the bound vLLM reads (unset: reading.missing_max_tokens) x sequences x prompts
    work: int | None = None
    work_units: int = 1  # sequences x prompts: what a cap divides by


@dataclass(frozen=True, slots=True)
class _Range:
    lane: str
    lo: int | None
    hi: int | None

    def holds(self, value: int | None) -> bool:
        if value is None:
            return False
        return (self.lo is None or value >= self.lo) and (self.hi is None or value <= self.hi)


@dataclass(frozen=True, slots=True)
class RouteTable:
    """The compiled routing rules of one gateway."""

    lanes: frozenset[str]
    default_lane: str
    models: Mapping[str, str]
    regexes: tuple[tuple[Any, str], ...] = ()  # RE2 patterns (re2 has no type hints)
    prompt_chars: tuple[_Range, ...] = ()
    max_tokens: tuple[_Range, ...] = ()
    # model -> the lane owning it, for models a lane other than the default owns (declared models;
    # the gateway replaces it as lanes learn theirs: LaneModels.served_elsewhere)
    served_elsewhere: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: GatewayConfig) -> RouteTable:
        """Compile the gateway config's rules; the config is already validated."""
        default = cfg.effective_default_lane
        if default is None:
            raise ValueError("the gateway has no lanes")
        rules = cfg.rules
        return cls(
            lanes=frozenset(cfg.lanes),
            default_lane=default,
            models=dict(rules.models),
            regexes=tuple((re2.compile(r.pattern), r.lane) for r in rules.message_regex),
            prompt_chars=tuple(_Range(r.lane, r.min, r.max) for r in rules.prompt_chars),
            max_tokens=tuple(_Range(r.lane, r.min, r.max) for r in rules.max_tokens),
            served_elsewhere=LaneModels.from_config(cfg).served_elsewhere(default),
        )


@dataclass(frozen=True, slots=True)
class Routed:
    """The lane chosen and the rule that chose it (header, model, regex, prompt_chars, ...)."""

    lane: str
    rule: str


def choose_lane(table: RouteTable, req: RouteInput) -> Routed:
    """Apply the rules in order; raise RouteError for an unknown lane in the header."""
    if req.header_lane is not None:
        if req.header_lane not in table.lanes:
            raise RouteError(f"unknown lane {req.header_lane!r}; lanes: {', '.join(sorted(table.lanes))}")
        return Routed(req.header_lane, "header")
    if req.model is not None and req.model in table.models:
        return Routed(table.models[req.model], "model")
    if req.last_user_message is not None:
        for pattern, lane in table.regexes:
            if pattern.search(req.last_user_message):
                return Routed(lane, "message_regex")
    for rng in table.prompt_chars:
        if rng.holds(req.prompt_chars):
            return Routed(rng.lane, "prompt_chars")
    for rng in table.max_tokens:
        if rng.holds(req.work):
            return Routed(rng.lane, "max_tokens")
    if req.model is not None and req.model in table.served_elsewhere:
        return Routed(table.served_elsewhere[req.model], "served_model")
    return Routed(table.default_lane, "default")


def route_input(
    body: Mapping[str, Any],
    header_lane: str | None,
    api: ReadApi = "chat",
    reading: ReadingConfig | None = None,
) -> RouteInput:
    """What routing needs of a chat or completions body; ReadingError for a field vLLM would refuse."""
    m = measure(body, api, reading or ReadingConfig())  # as the class rules read it: one reading
    return RouteInput(
        header_lane=header_lane,
        model=m.model,
        last_user_message=m.last_user_message,
        prompt_chars=m.prompt_chars,
        work=m.work,
        work_units=m.work_units,
    )
