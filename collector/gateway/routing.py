"""Which lane a request goes to: pure rules over what the request body and headers say.

Order (first match wins): the `x-lanewatch-lane` header (read only from a client
`gateway.hints` trusts, classify.py), the model-name map, a regex on
the last user message, prompt length in characters, max_tokens; then the fastest lane
that serves the requested model when the default lane does not serve it; then the
default lane.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lanewatch.collector.common.errors import ProtocolViolation
from lanewatch.collector.config import GatewayConfig

from .lane_models import LaneModels

__all__ = ["RouteError", "RouteInput", "RouteTable", "Routed", "choose_lane", "route_input"]


class RouteError(ProtocolViolation, ValueError):
    """The request names a lane that does not exist (a 400 for the client)."""


@dataclass(frozen=True, slots=True)
class RouteInput:
    """What routing looks at in one request; nothing else of the body is kept."""

    header_lane: str | None = None
    model: str | None = None
    last_user_message: str | None = None
    prompt_chars: int = 0
    max_tokens: int | None = None


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
    regexes: tuple[tuple[re.Pattern[str], str], ...] = ()
    prompt_chars: tuple[_Range, ...] = ()
    max_tokens: tuple[_Range, ...] = ()
    # model -> the fastest lane serving it, for models the default lane does not serve (declared
    # models; the gateway replaces it as lanes learn theirs: LaneModels.served_elsewhere)
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
            regexes=tuple((re.compile(r.pattern), r.lane) for r in rules.message_regex),
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
        if rng.holds(req.max_tokens):
            return Routed(rng.lane, "max_tokens")
    if req.model is not None and req.model in table.served_elsewhere:
        return Routed(table.served_elsewhere[req.model], "served_model")
    return Routed(table.default_lane, "default")


def route_input(body: Mapping[str, Any], header_lane: str | None) -> RouteInput:
    """Extract what routing needs from a chat or completions request body."""
    model = body.get("model")
    max_tokens = _int_or_none(body.get("max_completion_tokens", body.get("max_tokens")))
    messages = body.get("messages")
    if isinstance(messages, list):
        texts = [_message_text(m) for m in messages if isinstance(m, dict)]
        users = [_message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        last_user = users[-1] if users else None
        chars = sum(len(t) for t in texts)
    else:
        prompt = body.get("prompt")
        texts = _prompt_texts(prompt)
        last_user = texts[-1] if texts else None
        chars = sum(len(t) for t in texts)
    return RouteInput(
        header_lane=header_lane,
        model=model if isinstance(model, str) else None,
        last_user_message=last_user,
        prompt_chars=chars,
        max_tokens=max_tokens,
    )


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multi-part content: keep the text parts
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _prompt_texts(prompt: Any) -> list[str]:
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, Sequence) and all(isinstance(p, str) for p in prompt):
        return list(prompt)
    return []  # token-id prompts carry no text to match


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value
