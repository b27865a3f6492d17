"""A request's class by the operator's rules: the rule models and the pure first-match.

One implementation for every place lanewatch classes a request (the gateway's `gateway.classes`,
the LiteLLM handler's `classes`): a rule names a class, and a request matching every criterion
it gives is of that class; the first matching rule wins, else the default class. The measures
are what vLLM reads of the body (openai_api/request_reading.py), so a client cannot leave a batch
class by leaving out a header, and a `max_tokens` range holds the request's work (its bound x
`n` or `best_of` x its prompts), so no client leaves it by asking for many short answers at
once. No regular expressions here (the gateway's RE2 routes live in classify/hints.py), so the
module imports in any environment that has pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from lanewatch.collector.common.validation import ClassName
from lanewatch.collector.openai_api.request_reading import ReadApi, read_work

__all__ = [
    "DEFAULT_CLASS_RULES",
    "ClassRule",
    "IntRange",
    "Measures",
    "ReadingConfig",
    "class_of",
    "holds",
    "measure",
    "parse_class_rules",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
    # the work: the output bound vLLM reads (unset: reading.missing_max_tokens) x the sequences
    # (`n`, or `best_of` when larger) x the prompts (openai_api/request_reading.py)
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

_RULES: TypeAdapter[list[ClassRule]] = TypeAdapter(list[ClassRule])


def parse_class_rules(value: Iterable[Mapping[str, Any]]) -> tuple[ClassRule, ...]:
    """Rules from their config form (a list of `{name, models, api, max_tokens, prompt_chars}`);
    pydantic's ValidationError (a ValueError) naming the bad field."""
    return tuple(_RULES.validate_python(list(value)))


def holds(rng: IntRange, value: int | None) -> bool:
    """Whether `value` lies in the range (an unknown value lies in none)."""
    if value is None:
        return False
    return (rng.min is None or value >= rng.min) and (rng.max is None or value <= rng.max)


def _matches(
    rule: ClassRule, api: str, model: str | None, work: int | None, prompt_chars: int | None
) -> bool:
    if rule.models and model not in rule.models:
        return False
    if rule.api is not None and rule.api != api:
        return False
    if rule.max_tokens is not None and not holds(rule.max_tokens, work):
        return False
    return rule.prompt_chars is None or holds(rule.prompt_chars, prompt_chars)


def class_of(
    rules: Sequence[ClassRule],
    default: str,
    api: str,
    model: str | None,
    work: int | None,
    prompt_chars: int | None,
) -> str:
    """The first rule's class the request matches (`max_tokens` ranges over `work`), else `default`."""
    for rule in rules:
        if _matches(rule, api, model, work, prompt_chars):
            return rule.name
    return default


@dataclass(frozen=True, slots=True)
class Measures:
    """What class rules and routes read of a request body: its model, work and prompt."""

    model: str | None
    work: int  # output bound x sequences x prompts
    prompt_chars: int  # text characters + chars_per_token per token id
    work_units: int = 1  # sequences x prompts: what a cap on max_tokens multiplies
    last_user_message: str | None = None  # its first reading.regex_max_chars characters


def measure(body: Mapping[str, Any], api: ReadApi, reading: ReadingConfig) -> Measures:
    """A chat or completions body's measures as vLLM reads them (a missing chat bound counts
    reading.missing_max_tokens); ReadingError for a field vLLM would refuse."""
    model = body.get("model")
    work = read_work(body, api, reading.missing_max_tokens)
    last = work.prompt.last_user
    return Measures(
        model if isinstance(model, str) else None,
        work.total,
        work.prompt.chars + reading.chars_per_token * work.prompt.tokens,
        work.units,
        last[: reading.regex_max_chars] if last is not None else None,
    )
