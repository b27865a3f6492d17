"""A pure continuous-batching engine in the shape of vLLM V1's scheduler, with an injected clock.

Nothing here sleeps or reads a clock: `Engine.step(now)` schedules one forward pass starting at
`now`, returns how long it takes and what it produced, and the caller (runner.py) waits in real
time. What it models, after vllm/v1/core/sched/scheduler.py:
- at most `max_num_seqs` running requests and `max_num_batched_tokens` tokens per step; running
  requests are served first, then waiting ones in arrival order; a long prompt is prefilled in
  chunks across steps (chunked prefill) while the others keep decoding;
- a paged KV cache (kvcache.py) of `num_kv_blocks` blocks; when a running request needs a block
  and none is free, the last running request is preempted (its blocks freed, recomputed later);
- prefix caching: a prompt's leading full blocks already in the cache are not prefilled again;
- step time from `StepCost`: a fixed overhead, the larger of reading the weights once and
  computing every scheduled token, and reading each decoding request's KV cache;
- speculative decoding (specdecode.py, off unless configured): a decode step verifies up to
  `num_speculative_tokens` drafted tokens (scheduled, computed and budgeted like vLLM's spec
  tokens) and emits 1 + the accepted ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from .kvcache import KVCache, block_hashes
from .specdecode import SpecDecodeConfig, SpecStats, Verifier


@dataclass(frozen=True)
class StepCost:
    """Seconds one forward pass costs, from the profile's roofline."""

    overhead_s: float  # per step: scheduling, input preparation, sampling, launch
    per_seq_overhead_s: float  # per scheduled request per step (CPU bookkeeping)
    weights_s: float  # reading the weights once: the floor of every step (memory bound)
    token_s: float  # computing one token: 2 x params FLOPs at the effective FLOP/s
    kv_token_s: float  # reading one token of KV cache for one decoding request

    def seconds(
        self, prefill_tokens: int, decode_seqs: int, decode_context: int, seqs: int, draft_tokens: int = 0
    ) -> float:
        """Time of a step with these prefill tokens and decoding requests (context = KV tokens read;
        draft tokens = speculative tokens verified on top of one token per decoding request)."""
        compute = (prefill_tokens + decode_seqs + draft_tokens) * self.token_s
        return (
            self.overhead_s
            + seqs * self.per_seq_overhead_s
            + max(self.weights_s, compute)
            + decode_context * self.kv_token_s
        )


@dataclass(frozen=True)
class EngineConfig:
    """Scheduler and cache limits (vLLM's engine arguments of the same names)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    num_kv_blocks: int
    block_size: int
    max_model_len: int
    cost: StepCost
    enable_prefix_caching: bool = True
    spec: SpecDecodeConfig | None = None  # speculative decoding; None: off, as vLLM's default
    seed: int = 0  # for the spec-decode acceptance draws

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens the KV cache holds when full."""
        return self.num_kv_blocks * self.block_size


@dataclass(frozen=True)
class EngineRequest:
    """One request as the engine sees it: prompt ids and the exact number of tokens to generate."""

    request_id: str
    prompt_ids: Sequence[int]
    output_tokens: int
    queued_s: float  # when it entered the engine's queue (clock of the caller)


@dataclass(frozen=True)
class TokenOutput:
    """A token produced at the end of a step; `finished` is set on the request's last token."""

    request_id: str
    index: int  # of the first token this step produced for the request
    finished: bool
    count: int = 1  # tokens produced this step (more than one with speculative decoding)


@dataclass(frozen=True)
class RequestTimes:
    """vLLM's per-request engine timestamps (stats.py): queued, scheduled, first and last token."""

    queued_s: float
    scheduled_s: float
    first_token_s: float
    last_token_s: float
    prompt_tokens: int
    cached_tokens: int
    preemptions: int


@dataclass(frozen=True)
class StepResult:
    """One forward pass: when it ran, what it produced, and the counts vLLM's metrics use."""

    start_s: float
    end_s: float
    outputs: list[TokenOutput]
    finished: dict[str, RequestTimes]
    prompt_tokens: int  # prompts whose prefill completed this step (vLLM counts at first token)
    generation_tokens: int
    scheduled_tokens: int
    preemptions: int
    cache_queries: int
    cache_hits: int
    spec: SpecStats | None = None  # speculative decoding's counts, when it is on

    @property
    def duration_s(self) -> float:
        """Length of the step."""
        return self.end_s - self.start_s


@dataclass
class _Seq:
    req: EngineRequest
    hashes: list[int]
    computed: int = 0
    generated: int = 0
    scheduled_s: float | None = None
    first_token_s: float | None = None
    cached_tokens: int = 0
    preemptions: int = 0

    @property
    def prompt_len(self) -> int:
        return len(self.req.prompt_ids)

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.generated


@dataclass
class _Planned:
    seq: _Seq
    n: int  # tokens scheduled (for a decode: 1 + draft)
    decode: bool
    draft: int = 0  # speculative tokens verified in this decode


@dataclass
class _Plan:
    seqs: list[_Planned] = field(default_factory=list)
    preemptions: int = 0
    queries: int = 0
    hits: int = 0


class Engine:
    """The scheduler, KV cache and step-time model; every method takes the time from its caller."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.kv = KVCache(config.num_kv_blocks, config.block_size, config.enable_prefix_caching)
        self._waiting: deque[_Seq] = deque()
        self._running: list[_Seq] = []
        self._verifier = Verifier(config.spec, config.seed) if config.spec else None

    @property
    def num_running(self) -> int:
        """Requests in the running batch."""
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        """Requests waiting to be scheduled."""
        return len(self._waiting)

    @property
    def has_work(self) -> bool:
        """Whether a step would do anything."""
        return bool(self._running or self._waiting)

    def check(self, prompt_tokens: int, output_tokens: int) -> str | None:
        """Why a request cannot be served at all (None if it can)."""
        total = prompt_tokens + output_tokens
        if total > self.config.max_model_len:
            return f"needs {total} tokens; max_model_len is {self.config.max_model_len}"
        if total > self.config.kv_capacity_tokens:
            return f"needs {total} tokens; the KV cache holds {self.config.kv_capacity_tokens}"
        return None

    def add(self, req: EngineRequest) -> None:
        """Queue a request; `check` must have accepted it."""
        if req.output_tokens < 1 or not req.prompt_ids:
            raise ValueError("a request needs a prompt and at least one output token")
        hashes = block_hashes(req.prompt_ids, self.config.block_size)
        self._waiting.append(_Seq(req, hashes))

    def abort(self, request_id: str) -> bool:
        """Drop a request wherever it is; False if the engine does not hold it."""
        for seq in self._running:
            if seq.req.request_id == request_id:
                self._running.remove(seq)
                self.kv.free(request_id)
                return True
        for seq in self._waiting:
            if seq.req.request_id == request_id:
                self._waiting.remove(seq)
                return True
        return False

    def step(self, now: float, prefill_factor: float = 1.0, decode_factor: float = 1.0) -> StepResult | None:
        """Schedule and run one forward pass from `now`; None when there is nothing to run.

        The step's time scales by the slowdown factors, weighted by its prefill and decode tokens.
        """
        plan = self._schedule(now)
        if not plan.seqs:
            return None
        decoding = [p for p in plan.seqs if p.decode]
        prefill = sum(p.n for p in plan.seqs if not p.decode)
        context = sum(p.seq.computed for p in decoding)
        drafts = sum(p.draft for p in decoding)
        base = self.config.cost.seconds(prefill, len(decoding), context, len(plan.seqs), drafts)
        if drafts and self.config.spec is not None:
            base += self.config.spec.proposer_s
        factor = (prefill * prefill_factor + len(decoding) * decode_factor) / (prefill + len(decoding))
        return self._advance(plan, now, now + base * factor)

    def _schedule(self, now: float) -> _Plan:
        plan = _Plan()
        budget = self.config.max_num_batched_tokens
        i = 0
        while i < len(self._running) and budget > 0:
            seq = self._running[i]
            planned = self._plan_running(seq, budget)
            if self._grow_or_preempt(seq, planned.n, plan):
                plan.seqs.append(planned)
                budget -= planned.n
                i += 1
            elif seq not in self._running:
                break
        if plan.preemptions:
            return plan  # as vLLM: no new admissions in a step that had to preempt
        while self._waiting and len(self._running) < self.config.max_num_seqs and budget > 0:
            seq = self._waiting[0]
            if not self._admit(seq, budget, plan):
                break
            self._waiting.popleft()
            self._running.append(seq)
            if seq.scheduled_s is None:
                seq.scheduled_s = max(now, seq.req.queued_s)
            n = min(seq.num_tokens - seq.computed, budget)
            plan.seqs.append(_Planned(seq, n, decode=False))
            budget -= n
        return plan

    def _plan_running(self, seq: _Seq, budget: int) -> _Planned:
        """A running request's share of the step: a decode (with its draft) or a prefill chunk."""
        n = min(seq.num_tokens - seq.computed, budget)
        decode = seq.generated > 0 and seq.computed == seq.num_tokens - 1
        if not decode or self._verifier is None:
            return _Planned(seq, n, decode)
        draft = min(self._verifier.draft_len(seq.req.output_tokens - seq.generated), budget - 1)
        return _Planned(seq, 1 + draft, True, draft)

    def _grow_or_preempt(self, seq: _Seq, n: int, plan: _Plan) -> bool:
        rid = seq.req.request_id
        while not self.kv.grow(rid, seq.computed + n):
            victim = self._running.pop()
            self.kv.free(victim.req.request_id)
            victim.computed = 0
            victim.preemptions += 1
            self._waiting.appendleft(victim)
            plan.preemptions += 1
            if victim is seq:
                return False
        return True

    def _admit(self, seq: _Seq, budget: int, plan: _Plan) -> bool:
        rid = seq.req.request_id
        # At least one prompt token is always computed, so a fully cached prompt still samples.
        usable = seq.hashes[: (seq.prompt_len - 1) // self.config.block_size]
        n_total = seq.num_tokens
        hits = self.kv.lookup(usable)
        first_chunk = min(n_total - hits * self.config.block_size, budget)
        if not self.kv.start(rid, usable[:hits], hits * self.config.block_size + first_chunk):
            return False
        cached = hits * self.config.block_size
        seq.computed = cached
        plan.queries += seq.prompt_len
        plan.hits += cached
        if seq.preemptions == 0:
            seq.cached_tokens = cached
        return True

    def _advance(self, plan: _Plan, start: float, end: float) -> StepResult:
        outputs: list[TokenOutput] = []
        finished: dict[str, RequestTimes] = {}
        prompt_tokens = 0
        spec = SpecStats(self.config.spec.num_speculative_tokens) if self.config.spec else None
        for p in plan.seqs:
            seq = p.seq
            was_prefilling = seq.computed < seq.prompt_len
            accepted = 0
            if p.draft and self._verifier is not None and spec is not None:
                accepted = self._verifier.accept(p.draft)
                spec.observe(p.draft, accepted)
            # rejected draft tokens leave no KV behind: the sampled token and accepted drafts do
            seq.computed += p.n - p.draft + accepted
            if was_prefilling and seq.computed >= seq.prompt_len:
                self.kv.publish(seq.req.request_id, seq.hashes)
            if seq.computed < seq.num_tokens:
                continue  # a prefill chunk that does not finish the prompt samples nothing
            if seq.first_token_s is None:
                # A request that arrived during this step counts as scheduled at its arrival, which
                # can be after the step's end: its first token is never before it (no negative prefill).
                seq.first_token_s = max(end, seq.scheduled_s or end)
                prompt_tokens += seq.prompt_len
            count = 1 + accepted
            seq.generated += count
            done = seq.generated >= seq.req.output_tokens
            outputs.append(TokenOutput(seq.req.request_id, seq.generated - count, done, count))
            if done:
                finished[seq.req.request_id] = self._finish(seq, end)
        return StepResult(
            start_s=start,
            end_s=end,
            outputs=outputs,
            finished=finished,
            prompt_tokens=prompt_tokens,
            generation_tokens=sum(o.count for o in outputs),
            scheduled_tokens=sum(p.n for p in plan.seqs),
            preemptions=plan.preemptions,
            cache_queries=plan.queries,
            cache_hits=plan.hits,
            spec=spec,
        )

    def _finish(self, seq: _Seq, end: float) -> RequestTimes:
        self._running.remove(seq)
        self.kv.free(seq.req.request_id)
        assert seq.scheduled_s is not None and seq.first_token_s is not None
        return RequestTimes(
            queued_s=seq.req.queued_s,
            scheduled_s=seq.scheduled_s,
            first_token_s=seq.first_token_s,
            last_token_s=max(end, seq.first_token_s),  # see _advance: never before the first
            prompt_tokens=seq.prompt_len,
            cached_tokens=seq.cached_tokens,
            preemptions=seq.preemptions,
        )
