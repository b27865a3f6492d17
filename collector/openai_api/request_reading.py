"""How many tokens a request asks for, its work, and how big its prompt is, read as vLLM reads them.

One pure module that every router mirrors (the gateway's classes, routes and max_tokens cap; an
Envoy Lua port or a LiteLLM handler). The rule, from vLLM 0.32's `ChatCompletionRequest` and
`CompletionRequest` (pydantic, lax mode), is in docs/gateway.md#what-the-gateway-reads:

- A token count is what pydantic's lax `int` takes: a JSON integer, `true`/`false` (1/0), an
  integral finite float within int64 (`4096.0`), or a string of one (`"4096"`, `" 4_096 "`,
  `"4096.0"`); `null` is unset. Anything else is unreadable: vLLM answers 400, so does the router.
- Chat: `max_completion_tokens` when not null, else `max_tokens`; both unset: None (vLLM then
  allows up to the context length). Completions: `max_tokens` only (vLLM ignores
  `max_completion_tokens` there), null or absent: 16, vLLM's default.
- Prompt: chat counts the characters of every message's text; completions take `prompt` as
  text, a list of texts, token ids or a list of token-id lists (ids >= 0), and count characters
  and token ids apart.
- Sequences: `n` (chat: null is 1; completions: null is refused, vLLM's `n: int`), or `best_of`
  when larger. vLLM 0.32's chat and completions models have no `best_of` (an extra field it
  ignores); earlier vLLM and other OpenAI servers generate `best_of` sequences and return `n`, so
  it counts: reading it as smaller than a server may run it would let work pass a shed. Each is an
  integer >= 1; a bool, a fraction or anything else is refused, naming the field.
- Prompts: chat has one conversation; completions run one engine request per prompt as vLLM's
  renderer splits them: each `prompt_embeds` entry, then text or token ids (one), or each text or
  token-id list of a list. At least one counts.
- Work: the bound x sequences x prompts, the tokens the request may have the engine generate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from lanewatch.collector.common.errors import ProtocolViolation

__all__ = [
    "COMPLETIONS_DEFAULT_MAX_TOKENS",
    "PromptReading",
    "ReadingError",
    "WorkReading",
    "read_max_tokens",
    "read_prompt",
    "read_sequences",
    "read_tokens",
    "read_work",
    "work_units",
]

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # vLLM's CompletionRequest.max_tokens default (and null's)
ReadApi = Literal["chat", "completions"]

# pydantic's own lax int: the same library and mode vLLM's request models validate with.
_INT: TypeAdapter[int] = TypeAdapter(int)
_TokenId = Annotated[int, Field(ge=0)]
_PROMPT: TypeAdapter[list[int] | list[list[int]] | str | list[str] | None] = TypeAdapter(
    list[_TokenId] | list[list[_TokenId]] | str | list[str] | None
)


class ReadingError(ProtocolViolation, ValueError):
    """A field vLLM would refuse (a 400 naming `field`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class PromptReading:
    """The prompt's size: characters of text and token ids, apart; and its last user text."""

    chars: int = 0
    tokens: int = 0
    last_user: str | None = None
    count: int = 1  # prompts the engine runs apart (a completions list): the work multiplies by it


def read_tokens(value: Any, field: str) -> int | None:
    """A token count as vLLM reads it (None for null); ReadingError when vLLM would refuse it."""
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        raise ReadingError(field, f"{field} must be an integer")
    try:
        return _INT.validate_python(value)
    except ValidationError:
        raise ReadingError(field, f"{field} must be an integer; got {str(value)[:40]!r}") from None


def read_max_tokens(body: Mapping[str, Any], api: ReadApi) -> int | None:
    """The output bound vLLM reads from the body; None: unset (chat only: up to the context length)."""
    if api == "completions":
        value = read_tokens(body.get("max_tokens"), "max_tokens")
        return COMPLETIONS_DEFAULT_MAX_TOKENS if value is None else value
    plain = read_tokens(body.get("max_tokens"), "max_tokens")  # vLLM validates both fields
    newer = read_tokens(body.get("max_completion_tokens"), "max_completion_tokens")
    return newer if newer is not None else plain


def read_prompt(body: Mapping[str, Any], api: ReadApi) -> PromptReading:
    """The prompt's characters and token ids; ReadingError for a completions prompt vLLM would refuse."""
    if api == "chat":
        return _chat_prompt(body.get("messages"))
    try:
        prompt = _PROMPT.validate_python(body.get("prompt"))
    except ValidationError:
        raise ReadingError("prompt", "prompt must be text, a list of texts, or token ids") from None
    texts, tokens = _split(prompt)
    embeds = _embeds(body.get("prompt_embeds"))  # no token count without decoding: text counts as chars
    chars = sum(len(t) for t in texts) + sum(len(e) for e in embeds)
    count = len(embeds) + _prompts(prompt)
    return PromptReading(chars, tokens, texts[-1] if texts else None, max(1, count))


def read_sequences(body: Mapping[str, Any], api: ReadApi) -> int:
    """The sequences each prompt runs: `n`, or `best_of` when larger; ReadingError naming the field
    for a value vLLM refuses (or a bool, a fraction, a count below 1)."""
    n = _count(body.get("n"), "n")
    if n is None:
        if api == "completions" and "n" in body:  # vLLM's CompletionRequest.n is `int`: null is refused
            raise ReadingError("n", "n must be an integer >= 1; got null")
        n = 1
    best_of = _count(body.get("best_of"), "best_of")
    return n if best_of is None else max(n, best_of)


@dataclass(frozen=True, slots=True)
class WorkReading:
    """A request's work as vLLM runs it: its bound x its sequences x its prompts."""

    bound: int  # the output bound vLLM reads; unset: the reader's `missing_max_tokens`
    units: int  # sequences x prompts: what one token of the bound costs the engine
    prompt: PromptReading

    @property
    def total(self) -> int:
        """The tokens the request may have the engine generate."""
        return self.bound * self.units


def read_work(body: Mapping[str, Any], api: ReadApi, missing_max_tokens: int) -> WorkReading:
    """The request's bound (unset: `missing_max_tokens`), prompt and sequences, each read once;
    ReadingError naming the first field vLLM would refuse."""
    bound = read_max_tokens(body, api)
    prompt = read_prompt(body, api)
    units = read_sequences(body, api) * prompt.count
    return WorkReading(missing_max_tokens if bound is None else bound, units, prompt)


def work_units(body: Mapping[str, Any], api: ReadApi) -> int:
    """Sequences x prompts: what one token of the bound costs the engine (the work's multiplier)."""
    return read_sequences(body, api) * read_prompt(body, api).count


def _count(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):  # pydantic reads true as 1; a flag is no count, and says so
        raise ReadingError(field, f"{field} must be an integer >= 1; got {str(value).lower()}")
    count = read_tokens(value, field)
    if count is None or count < 1:
        raise ReadingError(field, f"{field} must be an integer >= 1; got {count}")
    return count


def _prompts(prompt: list[int] | list[list[int]] | str | list[str] | None) -> int:
    """Engine requests of a validated `prompt`, as vLLM's prompt_to_seq splits it."""
    if prompt is None:
        return 0
    if isinstance(prompt, str) or (prompt and all(isinstance(p, int) for p in prompt)):
        return 1
    return len(prompt)


def _split(prompt: list[int] | list[list[int]] | str | list[str] | None) -> tuple[list[str], int]:
    if prompt is None:
        return [], 0
    if isinstance(prompt, str):
        return [prompt], 0
    if all(isinstance(p, str) for p in prompt):
        return [p for p in prompt if isinstance(p, str)], 0
    if all(isinstance(p, int) for p in prompt):
        return [], len(prompt)
    return [], sum(len(p) for p in prompt if isinstance(p, list))


def _embeds(embeds: Any) -> list[str]:
    """`prompt_embeds` (vLLM's `bytes | list[bytes]`, base64 text in JSON): one prompt per entry."""
    if embeds is None:
        return []
    if isinstance(embeds, str):
        return [embeds]
    if isinstance(embeds, list) and all(isinstance(e, str) for e in embeds):
        return list(embeds)
    raise ReadingError("prompt_embeds", "prompt_embeds must be text or a list of texts")


def _chat_prompt(messages: Any) -> PromptReading:
    if not isinstance(messages, list):
        return PromptReading()
    dicts = [m for m in messages if isinstance(m, dict)]
    texts = [_message_text(m) for m in dicts]
    users = [t for m, t in zip(dicts, texts, strict=True) if m.get("role") == "user"]
    return PromptReading(sum(len(t) for t in texts), 0, users[-1] if users else None)


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (str, bytes)):  # multi-part: text parts
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""
