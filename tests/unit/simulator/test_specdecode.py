"""Speculative decoding in the pure engine and on the metrics page: off by default, tokens per step
follow the configured acceptance, and vLLM's spec-decode counters count the drafts."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.simulator import FAST
from lanewatch.simulator.app import SimConfig, Simulator
from lanewatch.simulator.engine import Engine, EngineRequest, StepResult
from lanewatch.simulator.specdecode import SpecDecodeConfig
from tests.unit.simulator.test_engine import CONFIG, prompt

SPEC = "vllm:spec_decode_"


def steps(engine: Engine, requests: list[EngineRequest]) -> list[StepResult]:
    """Every step until the requests (all queued at 0) finish."""
    for r in requests:
        engine.add(r)
    out: list[StepResult] = []
    now = 0.0
    while engine.has_work:
        step = engine.step(now)
        assert step is not None
        out.append(step)
        now = step.end_s
    return out


def spec_engine(k: int, acceptance: float, **kw: float) -> Engine:
    return Engine(replace(CONFIG, spec=SpecDecodeConfig(k, acceptance, **kw), seed=1))


def test_off_by_default_one_token_per_step_and_no_spec_counts() -> None:
    assert CONFIG.spec is None
    run = steps(Engine(CONFIG), [EngineRequest("r", prompt(40), 20, 0.0)])
    assert all(o.count == 1 for s in run for o in s.outputs)
    assert all(s.spec is None for s in run)
    assert len(run) == 20  # one prefill step (first token), then one step per token


def test_full_acceptance_emits_k_plus_one_tokens_per_decode_step() -> None:
    run = steps(spec_engine(3, 1.0), [EngineRequest("r", prompt(40), 14, 0.0)])
    counts = [o.count for s in run for o in s.outputs]
    # the first token from the prefill step, then 1 + 3 per step; the last draft is cut to fit
    assert counts == [1, 4, 4, 4, 1]
    assert sum(counts) == 14
    assert [o.index for s in run for o in s.outputs] == [0, 1, 5, 9, 13]
    assert run[-1].outputs[-1].finished
    stats = [s.spec for s in run if s.spec is not None and s.spec.num_drafts]
    assert [(x.num_draft_tokens, x.num_accepted_tokens) for x in stats] == [(3, 3), (3, 3), (3, 3)]
    assert [x.accepted_per_pos for x in stats] == [[1, 1, 1]] * 3


def test_zero_acceptance_drafts_but_emits_one_token_per_step() -> None:
    run = steps(spec_engine(4, 0.0), [EngineRequest("r", prompt(40), 10, 0.0)])
    assert [o.count for s in run for o in s.outputs] == [1] * 10
    drafts = sum(s.spec.num_drafts for s in run if s.spec)
    assert drafts == 8  # steps 2..9 draft; the last token's step has nothing left to draft
    assert sum(s.spec.num_accepted_tokens for s in run if s.spec) == 0


def test_acceptance_sets_mean_acceptance_length_and_per_position_rates() -> None:
    cfg = SpecDecodeConfig(3, 0.6)
    run = steps(spec_engine(3, 0.6), [EngineRequest(f"r{i}", prompt(30, i), 400, 0.0) for i in range(4)])
    stats = [s.spec for s in run if s.spec is not None]
    drafts = sum(x.num_drafts for x in stats)
    assert drafts > 400
    length = 1 + sum(x.num_accepted_tokens for x in stats) / drafts
    assert cfg.mean_acceptance_length() == pytest.approx(1 + 0.6 + 0.36 + 0.216)
    assert length == pytest.approx(cfg.mean_acceptance_length(), abs=0.15)
    per_pos = [sum(x.accepted_per_pos[i] for x in stats) / drafts for i in range(3)]
    assert per_pos == pytest.approx([0.6, 0.36, 0.216], abs=0.06)
    # tokens the stream carries = 1 (prefill) + drafts + accepted, per request
    assert sum(o.count for s in run for o in s.outputs) == 4 * 400


def test_good_acceptance_cuts_decode_time_and_a_costly_poor_drafter_adds_to_it() -> None:
    def decode_s(engine: Engine) -> float:
        run = steps(engine, [EngineRequest("r", prompt(40), 200, 0.0)])
        (t,) = [s.finished["r"] for s in run if s.finished]
        return t.last_token_s - t.first_token_s

    base = decode_s(Engine(CONFIG))
    assert decode_s(spec_engine(3, 0.9)) < base / 2
    assert decode_s(spec_engine(3, 0.1, draft_token_s=1e-3)) > base * 1.3


def test_draft_tokens_count_against_the_step_token_budget() -> None:
    run = steps(
        Engine(replace(CONFIG, max_num_batched_tokens=8, spec=SpecDecodeConfig(5, 1.0))),
        [EngineRequest(f"r{i}", prompt(4, i), 30, 0.0) for i in range(2)],
    )
    assert all(s.scheduled_tokens <= 8 for s in run)
    assert sum(o.count for s in run for o in s.outputs) == 60


def test_config_is_validated() -> None:
    for bad, field in (
        ({"num_speculative_tokens": 0, "acceptance": 0.5}, "num_speculative_tokens"),
        ({"num_speculative_tokens": 3, "acceptance": 1.5}, "acceptance"),
    ):
        with pytest.raises(ValueError, match=field):
            SpecDecodeConfig(**bad)  # type: ignore[arg-type]


def page(spec: SpecDecodeConfig | None) -> dict[str, list[tuple[dict[str, str], float]]]:
    sim = Simulator(SimConfig(profile=FAST, model="m", spec=spec))
    engine = sim.engine
    for i in range(3):
        engine.add(EngineRequest(f"r{i}", prompt(30, i), 20, 0.0))
    now = 0.0
    while engine.has_work:
        step = engine.step(now)
        assert step is not None
        sim.runner._on_step(step)
        now = step.end_s
    text = generate_latest(sim.registry).decode()
    return {
        f.name: [(s.labels, s.value) for s in f.samples if s.name.endswith("_total")]
        for f in text_string_to_metric_families(text)
        if f.name.startswith(SPEC)
    }


def test_spec_decode_families_are_absent_when_off_and_count_when_on() -> None:
    assert SimConfig(profile=FAST, model="m").spec is None
    assert page(None) == {}
    on = page(SpecDecodeConfig(2, 1.0))
    base = {"model_name": "m", "engine": "0"}
    # 3 requests x 20 tokens: the first from prefill, then 6 steps of 1 + 2 and a last one undrafted
    assert on[SPEC + "num_drafts"] == [(base, 18.0)]
    assert on[SPEC + "num_draft_tokens"] == [(base, 36.0)]
    assert on[SPEC + "num_accepted_tokens"] == [(base, 36.0)]
    assert on[SPEC + "num_accepted_tokens_per_pos"] == [
        ({**base, "position": "0"}, 18.0),
        ({**base, "position": "1"}, 18.0),
    ]
