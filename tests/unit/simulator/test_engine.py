"""The engine's timing model, driven by a discrete-event loop (no real time)."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from lanewatch.simulator.engine import Engine, EngineConfig, EngineRequest, RequestTimes, StepCost
from lanewatch.simulator.profiles import FAST, SLOW

COST = StepCost(overhead_s=1e-3, per_seq_overhead_s=0.0, weights_s=2e-3, token_s=1e-5, kv_token_s=1e-7)
CONFIG = EngineConfig(
    max_num_seqs=4,
    max_num_batched_tokens=512,
    num_kv_blocks=10_000,
    block_size=16,
    max_model_len=8192,
    cost=COST,
)


def prompt(n: int, tag: int = 0) -> list[int]:
    """n distinct prompt ids; `tag` makes prompts differ from their first token."""
    return [tag * 1_000_000 + i for i in range(n)]


def run(
    engine: Engine,
    requests: list[tuple[float, EngineRequest]],
    prefill_factor: float = 1.0,
    decode_factor: float = 1.0,
) -> dict[str, RequestTimes]:
    """Feed arrivals at their times and step until every request finishes."""
    pending = sorted(requests, key=lambda r: r[0])
    done: dict[str, RequestTimes] = {}
    now = 0.0
    while pending or engine.has_work:
        while pending and pending[0][0] <= now:
            engine.add(pending.pop(0)[1])
        step = engine.step(now, prefill_factor, decode_factor)
        if step is None:
            now = pending[0][0]
            continue
        done.update(step.finished)
        now = step.end_s
    return done


def req(
    rid: str, n_prompt: int, n_out: int, at: float = 0.0, tag: int | None = None
) -> tuple[float, EngineRequest]:
    return at, EngineRequest(rid, prompt(n_prompt, hash(rid) % 1000 if tag is None else tag), n_out, at)


def ttft(t: RequestTimes) -> float:
    return t.first_token_s - t.queued_s


def test_ttft_grows_with_prompt_length() -> None:
    ttfts = [ttft(run(Engine(CONFIG), [req("r", n, 4)])["r"]) for n in (10, 400, 2000, 4000)]
    assert ttfts == sorted(ttfts)
    assert ttfts[-1] > 5 * ttfts[0]
    # 4000 tokens in 512-token chunks: 8 steps, compute bound: ~4000 x token_s + 8 x overhead
    assert ttfts[-1] == pytest.approx(4000 * COST.token_s + 8 * COST.overhead_s, rel=0.05)


def test_e2e_grows_with_output_tokens() -> None:
    e2e = []
    for n_out in (1, 10, 100, 500):
        t = run(Engine(CONFIG), [req("r", 50, n_out)])["r"]
        e2e.append(t.last_token_s - t.queued_s)
    assert e2e == sorted(e2e) and e2e[0] < e2e[1]
    # each further token costs one decode step: overhead + weights read + its KV read
    per_token = (e2e[3] - e2e[2]) / 400
    assert per_token == pytest.approx(COST.overhead_s + COST.weights_s, rel=0.05)


def test_queue_time_rises_once_concurrency_passes_max_num_seqs() -> None:
    def mean_queue(n: int) -> float:
        done = run(Engine(CONFIG), [req(f"r{i}", 50, 50) for i in range(n)])
        return statistics.mean(t.scheduled_s - t.queued_s for t in done.values())

    within = mean_queue(CONFIG.max_num_seqs)
    beyond = mean_queue(2 * CONFIG.max_num_seqs)
    assert within == 0.0
    # the second wave waits for the whole first wave (~50 decode steps)
    assert beyond > 20 * (COST.overhead_s + COST.weights_s)


def test_running_never_exceeds_max_num_seqs_and_budget() -> None:
    engine = Engine(CONFIG)
    for _, r in [req(f"r{i}", 300, 20) for i in range(10)]:
        engine.add(r)
    now = 0.0
    while engine.has_work:
        step = engine.step(now)
        assert step is not None
        assert engine.num_running <= CONFIG.max_num_seqs
        assert step.scheduled_tokens <= CONFIG.max_num_batched_tokens
        now = step.end_s


def test_cached_prefix_cuts_ttft() -> None:
    engine = Engine(CONFIG)
    shared = prompt(3000, tag=7)
    first = run(engine, [(0.0, EngineRequest("a", [*shared, 1, 2, 3], 2, 0.0))])["a"]
    second = run(engine, [(1.0, EngineRequest("b", [*shared, 4, 5, 6], 2, 1.0))])["b"]
    assert first.cached_tokens == 0
    assert second.cached_tokens == 3000 // 16 * 16
    assert ttft(second) < ttft(first) / 4


def test_prefix_cache_off_means_no_hits() -> None:
    engine = Engine(replace(CONFIG, enable_prefix_caching=False))
    shared = prompt(1000, tag=3)
    run(engine, [(0.0, EngineRequest("a", shared, 2, 0.0))])
    again = run(engine, [(1.0, EngineRequest("b", shared, 2, 1.0))])["b"]
    assert again.cached_tokens == 0


@pytest.mark.parametrize("k", [2.0, 3.5])
def test_decode_slowdown_raises_tpot_by_k(k: float) -> None:
    def tpot(factor: float) -> float:
        t = run(Engine(CONFIG), [req("r", 100, 200)], decode_factor=factor)["r"]
        return (t.last_token_s - t.first_token_s) / 199

    assert tpot(k) / tpot(1.0) == pytest.approx(k, rel=0.05)


def test_prefill_slowdown_raises_ttft_not_tpot() -> None:
    base = run(Engine(CONFIG), [req("r", 2000, 50)])["r"]
    slow = run(Engine(CONFIG), [req("r", 2000, 50)], prefill_factor=3.0)["r"]
    assert ttft(slow) == pytest.approx(3 * ttft(base), rel=0.05)
    assert slow.last_token_s - slow.first_token_s == pytest.approx(base.last_token_s - base.first_token_s)


def test_decode_step_grows_with_batch() -> None:
    def tpot(batch: int) -> float:
        done = run(Engine(replace(CONFIG, max_num_seqs=256)), [req(f"r{i}", 1000, 100) for i in range(batch)])
        return statistics.median((t.last_token_s - t.first_token_s) / 99 for t in done.values())

    assert tpot(1) < tpot(32) < tpot(256)


def test_preemption_when_kv_cache_is_full() -> None:
    # 40 blocks of 16 tokens: room for two 100+200-token requests at most, not four
    small = replace(CONFIG, num_kv_blocks=40, max_model_len=640)
    engine = Engine(small)
    done = run(engine, [req(f"r{i}", 100, 200) for i in range(4)])
    assert len(done) == 4
    assert sum(t.preemptions for t in done.values()) > 0
    assert engine.kv.used == 0


def test_check_rejects_what_cannot_fit() -> None:
    engine = Engine(replace(CONFIG, num_kv_blocks=10))
    assert engine.check(100, 50) is None
    assert "KV cache" in (engine.check(100, 100) or "")
    assert "max_model_len" in (engine.check(8000, 500) or "")


def test_abort_frees_blocks() -> None:
    engine = Engine(CONFIG)
    engine.add(req("a", 500, 100)[1])
    engine.step(0.0)
    assert engine.kv.used > 0
    assert engine.abort("a")
    assert engine.kv.used == 0 and not engine.has_work
    assert not engine.abort("a")


@pytest.mark.parametrize("profile", [FAST, SLOW])
def test_profiles_meet_their_lane_targets(profile: object) -> None:
    p = FAST if profile is FAST else SLOW
    short = run(Engine(p.engine_config()), [req("r", 30, 64)])["r"]
    tpot = (short.last_token_s - short.first_token_s) / 63
    if p is FAST:
        assert 1e-3 < tpot < 5e-3
    else:
        assert 20e-3 < tpot < 40e-3
        long = run(Engine(p.engine_config()), [req("r", 2000, 4)])["r"]
        assert 0.2 < ttft(long) < 1.0


def test_slow_lane_is_clearly_slower() -> None:
    fast = run(Engine(FAST.engine_config()), [req("r", 2000, 64)])["r"]
    slow = run(Engine(SLOW.engine_config()), [req("r", 2000, 64)])["r"]
    assert ttft(slow) > 10 * ttft(fast)
    assert slow.last_token_s - slow.first_token_s > 8 * (fast.last_token_s - fast.first_token_s)


@pytest.mark.parametrize("n_out", [1, 3])
def test_phases_never_go_negative_for_a_request_that_arrived_during_a_step(n_out: int) -> None:
    # Queued (by the wall clock) after the step it is admitted in began: scheduled at its arrival,
    # which can fall after the step's end. Its span once reported a negative prefill.
    engine = Engine(CONFIG)
    engine.add(EngineRequest("late", prompt(8), n_out, 1.0))
    done = run(engine, [])
    t = done["late"]
    assert t.scheduled_s >= t.queued_s
    assert t.first_token_s >= t.scheduled_s and t.last_token_s >= t.first_token_s
