"""Conditions the simulator produces on purpose, on the pure engine and profile (clock injected):
chunked-prefill interference under a token budget, the front-end delay, the keep-alive setting."""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import generate_latest
from typer.testing import CliRunner

from lanewatch.simulator.engine import Engine, EngineRequest
from lanewatch.simulator.profiles import FAST, SLOW
from tests.unit.simulator.test_engine import CONFIG, prompt


def decode_gaps(budget: int, long_prompts_at: tuple[float, ...]) -> tuple[list[float], float]:
    """Inter-token gaps of 4 decoding requests while 4,000-token prompts arrive at the given times,
    and the worst TTFT of those prompts."""
    engine = Engine(replace(CONFIG, max_num_batched_tokens=budget, max_num_seqs=16))
    for i in range(4):
        engine.add(EngineRequest(f"d{i}", prompt(20, i), 300, 0.0))
    arrivals = sorted(
        (at, EngineRequest(f"long{j}", prompt(4000, 100 + j), 1, at)) for j, at in enumerate(long_prompts_at)
    )
    last: dict[str, float] = {}
    gaps: list[float] = []
    ttfts: list[float] = [0.0]
    now = 0.0
    while engine.has_work or arrivals:
        while arrivals and arrivals[0][0] <= now:
            engine.add(arrivals.pop(0)[1])
        step = engine.step(now)
        if step is None:
            now = arrivals[0][0]
            continue
        for out in step.outputs:
            rid = out.request_id
            if rid.startswith("d"):
                if rid in last:
                    gaps.append(step.end_s - last[rid])
                last[rid] = step.end_s
        ttfts += [t.first_token_s - t.queued_s for r, t in step.finished.items() if r.startswith("long")]
        now = step.end_s
    return gaps, max(ttfts)


def p99_over_p50(gaps: list[float]) -> float:
    q = statistics.quantiles(gaps, n=100)
    return q[98] / statistics.median(gaps)


def test_decodes_alone_have_even_token_gaps() -> None:
    gaps, _ = decode_gaps(4096, ())
    assert p99_over_p50(gaps) < 1.2


def test_long_prompts_among_decodes_stall_them_by_their_prefill_chunk() -> None:
    gaps, _ = decode_gaps(4096, (0.1, 0.3, 0.5, 0.7))
    p50 = statistics.median(gaps)
    # a 4,096-token chunk shares a step with the decodes: ~4,096 x token_s longer than a decode step
    assert max(gaps) == pytest.approx(p50 + 4092 * CONFIG.cost.token_s, rel=0.1)
    assert p99_over_p50(gaps) > 5


def test_a_smaller_token_budget_trades_stalls_for_prefill_time() -> None:
    arrivals = (0.1, 0.3, 0.5, 0.7)
    big, big_ttft = decode_gaps(4096, arrivals)
    small, small_ttft = decode_gaps(256, arrivals)
    assert max(small) < max(big) / 4
    assert p99_over_p50(small) < 2
    assert small_ttft > big_ttft  # the long prompts take more, shorter steps


@pytest.mark.parametrize("profile", [FAST, SLOW])
def test_the_front_end_delay_is_fixed_plus_per_prompt_token(profile: Any) -> None:
    assert profile.frontend_delay_s(1000) == pytest.approx(4e-3 + 1000 * 1e-6)  # the defaults
    slow_front = replace(profile, frontend_s=0.25, frontend_per_token_s=1e-4)
    assert slow_front.frontend_delay_s(1000) == pytest.approx(0.25 + 0.1)
    assert slow_front.engine_config() == profile.engine_config()  # the engine does not see it


def test_sim_command_passes_its_settings_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from lanewatch.collector.cli import app
    from lanewatch.simulator import server

    seen: dict[str, Any] = {}

    class NoRun:
        def run(self) -> None:
            pass

    def fake_build(sim: Any, opts: Any, *, make_config: Any) -> NoRun:
        seen["sim"], seen["config"] = sim, make_config(object())
        return NoRun()

    monkeypatch.setattr(server, "build_server", fake_build)
    runner = CliRunner()
    assert runner.invoke(app, ["sim"]).exit_code == 0
    cfg = seen["sim"].cfg
    assert (seen["config"].timeout_keep_alive, cfg.spec) == (30, None)
    assert cfg.profile == FAST
    assert seen["sim"].engine.config.enable_prefix_caching
    args = ["sim", "--keep-alive-s", "2", "--max-num-batched-tokens", "512", "--frontend-s", "0.2"]
    args += ["--frontend-per-token-s", "0.0001", "--num-speculative-tokens", "3", "--spec-acceptance", "0.4"]
    args += ["--no-enable-prefix-caching"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    cfg = seen["sim"].cfg
    assert seen["config"].timeout_keep_alive == 2
    assert seen["sim"].engine.config.max_num_batched_tokens == 512
    assert (cfg.profile.frontend_s, cfg.profile.frontend_per_token_s) == (0.2, 0.0001)
    assert (cfg.spec.num_speculative_tokens, cfg.spec.acceptance) == (3, 0.4)
    assert seen["sim"].engine.config.spec == cfg.spec
    assert not seen["sim"].engine.config.enable_prefix_caching
    assert 'enable_prefix_caching="False"' in generate_latest(seen["sim"].registry).decode()
