"""Speculative decoding in the engine (pure): how many drafted tokens a step accepts, and its counts.

As in vLLM V1 (vllm/v1/spec_decode/metrics.py): each decode step of a request verifies up to
`num_speculative_tokens` drafted tokens in one forward pass of the target model; the accepted
ones are a prefix of the draft (the first rejected token ends it), and the step emits them plus
one token of its own (the bonus or correction token), so a step emits 1 + accepted tokens.
vLLM counts per step: drafts (requests that verified a draft), draft tokens, accepted tokens,
and accepted tokens per draft position (position i counts drafts whose first i + 1 tokens were
accepted).

`acceptance` is the chance that a drafted token is accepted given that every token before it
was: with k speculative tokens the acceptance rate (accepted / drafted) is
(a + a^2 + ... + a^k) / k and the mean acceptance length 1 + a + a^2 + ... + a^k. Draws come
from a generator seeded by the engine's seed, so a run is reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SpecDecodeConfig:
    """vLLM's `--speculative-config` as far as timing goes: draft length, acceptance, proposer cost."""

    num_speculative_tokens: int
    acceptance: float  # chance a drafted token is accepted given its predecessors were (0..1)
    draft_token_s: float = 0.0  # proposer time per drafted position per step (0: an n-gram proposer)

    def __post_init__(self) -> None:
        if not 1 <= self.num_speculative_tokens <= 16:
            raise ValueError(f"num_speculative_tokens must be 1..16, got {self.num_speculative_tokens}")
        if not 0 <= self.acceptance <= 1:
            raise ValueError(f"acceptance must be within 0..1, got {self.acceptance}")
        if not 0 <= self.draft_token_s <= 1:
            raise ValueError(f"draft_token_s must be within 0..1 s, got {self.draft_token_s}")

    @property
    def proposer_s(self) -> float:
        """Time the proposer adds to a step that drafts (one pass per speculative position)."""
        return self.num_speculative_tokens * self.draft_token_s

    def mean_acceptance_length(self) -> float:
        """Expected tokens emitted per decode step with a full draft (vLLM's definition, bonus included)."""
        return 1 + sum(self.acceptance**i for i in range(1, self.num_speculative_tokens + 1))


@dataclass
class SpecStats:
    """One step's spec-decode counts, as vLLM's SpecDecodingStats."""

    num_spec_tokens: int
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.accepted_per_pos:
            self.accepted_per_pos = [0] * self.num_spec_tokens

    def observe(self, draft_tokens: int, accepted: int) -> None:
        """Count one verified draft."""
        self.num_drafts += 1
        self.num_draft_tokens += draft_tokens
        self.num_accepted_tokens += accepted
        for i in range(accepted):
            self.accepted_per_pos[i] += 1


class Verifier:
    """Decides, with a seeded generator, how many tokens of each draft the target model accepts."""

    def __init__(self, config: SpecDecodeConfig, seed: int = 0) -> None:
        self.config = config
        self._rng = random.Random(seed)

    def draft_len(self, remaining_output: int) -> int:
        """Tokens drafted for a request with this many output tokens still to come (none for its last)."""
        return max(0, min(self.config.num_speculative_tokens, remaining_output - 1))

    def accept(self, draft_tokens: int) -> int:
        """How many leading tokens of a draft of this length are accepted."""
        accepted = 0
        while accepted < draft_tokens and self._rng.random() < self.config.acceptance:
            accepted += 1
        return accepted
