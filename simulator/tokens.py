"""The simulator's deterministic tokenizer rule and seeded output, so tests can predict every count.

Tokenizer rule (no vocabulary files, no model download):
- a *token* of text is a run of word characters (`\\w+`) or a single other non-space character,
  so ``"Hello, world!"`` is 4 tokens: ``Hello`` ``,`` ``world`` ``!``;
- a completion prompt costs ``1 + tokens(prompt)`` (one BOS token); a prompt given as a list of
  token ids costs ``len(ids)``;
- a chat prompt follows a Llama-3-like template: ``1`` (BOS) ``+ Σ (4 + tokens(content))`` over the
  messages ``+ 3`` (the assistant header that opens the reply). Content given as a list of parts
  counts the text of its ``{"type": "text"}`` parts.

Output rule:
- with ``ignore_eos`` the reply has exactly ``max_tokens`` tokens and finishes with ``length``;
- otherwise the reply would end by itself after ``natural_length(...)`` tokens (16 to 512, a
  stable hash of the prompt text and the seed): it has ``min(max_tokens, natural)`` tokens and
  finishes with ``stop`` when it ended first, ``length`` when max_tokens cut it;
- token ``i`` of a reply is ``" " + WORDS[...]``: one word with a leading space, chosen by the
  seed (the request's ``seed``, else the server's ``--seed``) and the prompt, so the same
  request always gets the same text.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
BOS_TOKENS = 1
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_HEADER_TOKENS = 3
NATURAL_MIN = 16
NATURAL_SPAN = 497  # natural lengths fall in [16, 512]

WORDS: tuple[str, ...] = (
    "the", "latency", "of", "a", "request", "is", "split", "into", "phases", "queue", "prefill",
    "decode", "token", "stream", "batch", "lane", "model", "cache", "prefix", "kernel", "memory",
    "bandwidth", "and", "we", "measure", "every", "step", "so", "time", "goes", "where", "it", "should",
    "fast", "slow", "first", "chunk", "server", "client", "trace", "span", "budget", "burn", "rate",
)  # fmt: skip

FinishReason = Literal["stop", "length"]

# Fixed ids for template tokens; text tokens hash into the rest (consistent within one process,
# which is all the prefix cache needs).
_BOS_ID, _MSG_ID, _REPLY_ID = -1, -2, -3


def count_text_tokens(text: str) -> int:
    """Number of tokens in `text` under the simulator's rule."""
    return len(TOKEN_RE.findall(text))


def text_token_ids(text: str) -> list[int]:
    """Token ids of `text` (stable within one process)."""
    return [hash(t) for t in TOKEN_RE.findall(text)]


def message_text(content: Any) -> str:
    """The text of a chat message's content: a string or a list of OpenAI content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return " ".join(str(p) for p in parts)


def chat_prompt_ids(messages: Iterable[tuple[str, str]]) -> list[int]:
    """Token ids of a chat prompt from (role, text) pairs, template tokens included."""
    ids = [_BOS_ID]
    for role, text in messages:
        ids += [_MSG_ID, hash(role), _MSG_ID, _MSG_ID]
        ids += text_token_ids(text)
    ids += [_REPLY_ID] * REPLY_HEADER_TOKENS
    return ids


def completion_prompt_ids(prompt: str | Sequence[int]) -> list[int]:
    """Token ids of a completion prompt: text (BOS added) or ids as given."""
    if isinstance(prompt, str):
        return [_BOS_ID, *text_token_ids(prompt)]
    return list(prompt)


def text_digest(text: str, seed: int) -> int:
    """A hash of prompt text and a seed that is stable across processes and runs."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass"), seed & 0xFFFFFFFF)


def natural_length(digest: int) -> int:
    """Tokens a reply would take before it ends by itself (16 to 512)."""
    return NATURAL_MIN + digest % NATURAL_SPAN


@dataclass(frozen=True)
class OutputPlan:
    """How many tokens a reply has and why it ends."""

    tokens: int
    finish_reason: FinishReason


def plan_output(max_tokens: int, ignore_eos: bool, digest: int) -> OutputPlan:
    """The exact output length and finish reason for a request."""
    if ignore_eos:
        return OutputPlan(max_tokens, "length")
    natural = natural_length(digest)
    if natural < max_tokens:
        return OutputPlan(natural, "stop")
    return OutputPlan(max_tokens, "length")


def output_token(digest: int, index: int) -> str:
    """Text of output token `index` (0-based) of the reply identified by `digest`."""
    return " " + WORDS[(digest + index * 7919) % len(WORDS)]


def output_text(digest: int, count: int) -> str:
    """The whole reply text of `count` tokens."""
    return "".join(output_token(digest, i) for i in range(count))
