"""The gateway's request classification, as config: which clients may hint, and the operator's rules.

Part of the one config model (config.py: `gateway.hints`, `gateway.classes`). A request's
class is what shedding acts on and what every request metric is labelled with, so by default
the operator decides it, not the client: the `x-lanewatch-class` and `x-lanewatch-lane`
headers are honoured only from a trusted network or with the hint token, and otherwise
the first matching rule below names the class (then `gateway.default_class`).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

import re2  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lanewatch.collector.common.names import ClassName

__all__ = [
    "DEFAULT_CLASS_RULES",
    "ClassRule",
    "HintsConfig",
    "IntRange",
    "ReadingConfig",
    "check_prompt_regex",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HintsConfig(_Section):
    """Who may choose a request's class and lane with the gateway's headers; by default, nobody."""

    # Clients whose address lies in one of these networks (CIDR, e.g. 10.0.0.0/8, ::1/128).
    trusted_networks: list[str] = Field(default_factory=list)
    # A bearer token: a client sending `Authorization: Bearer <it>` may hint. Never logged.
    token_file: Path | None = None
    # The classes a trusted client may name; any other name counts as `other`.
    classes: list[ClassName] = Field(default_factory=lambda: ["interactive", "batch"])

    @field_validator("trusted_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for net in value:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError as exc:
                raise ValueError(f"bad network {net!r}: {exc}") from None
        return value


class ReadingConfig(_Section):
    """How classes and routes measure a request where its body leaves the measure open."""

    # What a chat request with neither max_tokens nor max_completion_tokens counts as: vLLM lets
    # it run up to the context length, so by default it is never in a smaller class than one
    # that asks for a lot. (A completions request without max_tokens counts 16, vLLM's default.)
    missing_max_tokens: int = Field(default=1_000_000, ge=1, le=2**31 - 1)
    # Prompt-size rules (prompt_chars) count each token id of a token-id prompt as this many chars.
    chars_per_token: int = Field(default=4, ge=1, le=64)
    # message_regex rules see only the first this many characters of the last user message.
    regex_max_chars: int = Field(default=16_384, ge=1, le=1_048_576)


_QUIET = re2.Options()
_QUIET.log_errors = False  # the error is raised with the field named; not printed to stderr too


def check_prompt_regex(pattern: str) -> str:
    """The pattern, when RE2 (linear time) compiles it; ValueError otherwise."""
    try:
        re2.compile(pattern, _QUIET)
    except re2.error as exc:
        raise ValueError(f"RE2 cannot compile this regular expression: {exc}") from None
    return pattern


class IntRange(_Section):
    """An inclusive range; either end open."""

    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounded(self) -> IntRange:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        return self


class ClassRule(_Section):
    """A request matching every criterion given is of class `name`; rules are tried in order."""

    name: ClassName
    models: list[str] = Field(default_factory=list)  # the requested model is one of these
    api: Literal["chat", "completions"] | None = None  # the route: /v1/chat/completions or /v1/completions
    # the output bound vLLM reads (common/request_reading.py); unset: reading.missing_max_tokens
    max_tokens: IntRange | None = None
    prompt_chars: IntRange | None = None  # characters of all prompt text, + chars_per_token per token id

    @model_validator(mode="after")
    def _some_criterion(self) -> ClassRule:
        if not self.models and self.api is None and self.max_tokens is None and self.prompt_chars is None:
            raise ValueError(f"class rule {self.name!r} needs models, api, max_tokens or prompt_chars")
        return self


# Out of the box: long answers and very long prompts are batch work; the rest is interactive.
DEFAULT_CLASS_RULES: tuple[ClassRule, ...] = (
    ClassRule(name="batch", max_tokens=IntRange(min=1024)),
    ClassRule(name="batch", prompt_chars=IntRange(min=32_000)),
)
